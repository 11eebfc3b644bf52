package gossip

// GoSGD (Blot et al. 2016, "Gossip training for deep learning") is
// push-sum over a peer-sampling service instead of a graph: every Δ a
// node takes a gradient step, then sends half of its (x, w) to one peer
// drawn at random from its view (Cyclon's, or HyParView's active view)
// and keeps the other half; a receiver adds what arrives. It needs no
// topology and no fixed neighbours, so it runs on the same partial views
// as random walk, and it keeps push-sum's exact mass accounting (running
// sums, accounts before sending, hand-off on leaving: pushsum.go), which
// it shares with pushsum line for line: only where the shares go differs.

func newGoSGD(cfg *Config) *pushSum {
	p := newPushSum(cfg)
	p.random = true
	return p
}

// pushRandom sends half of the node's mass to one peer of its view.
func (p *pushSum) pushRandom(n *Core) {
	to, ok := n.randomPeer()
	if !ok {
		return // alone for now: keep the whole mass
	}
	const share = 0.5
	x := p.scaled(n, n.params, share) // share·x, the node's part too
	p.send(n, to, x, share*p.w)
	p.keepShare(n, x)
	p.w *= share
	p.account(n)
}

// outs are the peers a node hands weight to when it leaves: pushsum's
// out-neighbours, or one peer of GoSGD's view.
func (p *pushSum) outs(n *Core) []PeerID {
	if p.random {
		if to, ok := n.randomPeer(); ok {
			return []PeerID{to}
		}
		return nil
	}
	out := make([]PeerID, len(p.cfg.Neighbors))
	for i, nb := range p.cfg.Neighbors {
		out[i] = nb.ID
	}
	return out
}

// nextOut is where a debt goes on to: the next out-neighbour in turn, or
// a peer of GoSGD's view.
func (p *pushSum) nextOut(n *Core) (PeerID, bool) {
	if p.random {
		return n.randomPeer()
	}
	nb := p.cfg.Neighbors
	if len(nb) == 0 {
		return "", false
	}
	to := nb[p.cursor%len(nb)].ID
	p.cursor = (p.cursor + 1) % len(nb)
	return to, true
}
