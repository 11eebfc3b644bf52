package gossip

import (
	"slices"

	"github.com/gossipd/gossipd/gossip/compress"
	"github.com/gossipd/gossipd/merge"
)

// CHOCO gossip over links, for AD-PSGD with a sparsifying compression
// (Config.Sparse). D-PSGD's node sends the same step to every neighbour
// each round, so one public copy of its model serves them all
// (choco.go); an AD-PSGD node talks to one neighbour at a time, so each
// direction of each link has its own public copy: x̂_{i→j}, held by i
// (out) and by j (in). A message from i to j carries q = Q(x_i − x̂_{i→j})
// and both ends add q to the copy; what Q leaves out stays in
// x_i − x̂_{i→j} and goes out later. The pairwise average becomes
//
//	x_i ← x_i + γ·½·(x̂_{j→i} − x̂_{i→j})
//
// at both ends over the same two copies, so the pair's sum is kept.
//
// A message's Round numbers its direction's messages. A gap (a lost
// message) or a copy this node never had makes the copy stale: it is
// left out of the average, and the node's next message on the link is a
// reset, a dense keyframe numbered 1, which tells the other end that its
// copy of that end is gone too, so that it answers with a keyframe. A
// restarted node has no copies (they are not checkpointed: a checkpoint
// is older than the steps sent since) and resets every link it uses.
//
// Push-sum uses the same copies (pushsum.go) with its own share numbers,
// no resets (its links may go one way only), and a keyframe every
// KeyframeEvery messages of a link instead.
type links struct {
	spec   compress.Spec
	gamma  float64
	every  uint64               // a keyframe every so many messages (0: none)
	resets bool                 // a node without a good copy of the peer's resets the link
	out    map[PeerID]*linkCopy // x̂_{i→j}
	in     map[PeerID]*linkCopy // x̂_{j→i}
}

// linkCopy is one direction's public copy, and the number of its last
// message.
type linkCopy struct {
	x     []float32 // nil: none (out: the next message is a keyframe)
	seq   uint64
	stale bool
}

func newLinks(cfg *Config, resets bool) *links {
	l := &links{spec: cfg.Sparse, gamma: cfg.ConsensusStep, resets: resets, out: map[PeerID]*linkCopy{}, in: map[PeerID]*linkCopy{}}
	if cfg.KeyframeEvery > 0 {
		l.every = uint64(cfg.KeyframeEvery)
	}
	return l
}

// message returns a message of the given kind carrying x to a peer: a
// compressed step of the link's copy, a keyframe where the peer has no
// copy, or a reset where this node has no good copy of the peer's.
func (l *links) message(n *Core, kind Kind, to PeerID, x []float32) Message {
	seq := uint64(1)
	if in := l.in[to]; l.resets && (in == nil || in.stale) {
		delete(l.out, to) // a reset: a keyframe numbered 1
	} else if o := l.out[to]; o != nil {
		seq = o.seq + 1
	}
	params, packed := l.pack(n, to, x, seq)
	m := Message{Kind: kind, To: to, Round: seq, Params: params, Packed: packed}
	if params != nil && n.cfg.HandsMixes() {
		m.sum = n.laterSum(params) // checked by its receiver once made
	}
	return m
}

// pack moves the link's copy towards x as message seq and returns what
// the message carries: a keyframe (params) or a compressed step.
func (l *links) pack(n *Core, to PeerID, x []float32, seq uint64) (params []float32, packed *compress.Payload) {
	o := l.out[to]
	if o == nil {
		o = &linkCopy{}
		l.out[to] = o
	}
	o.seq = seq
	if n.cfg.HandsMixes() { // every vector a new one, never written
		if o.x == nil || l.every > 0 && seq%l.every == 0 {
			o.x = x
			return x, nil
		}
		q, packed := n.sparseStep(x, o.x, l.spec)
		o.x = n.mixed([][]float32{o.x, q}, []float32{1, 1}, nil, 0)
		return nil, packed
	}
	if o.x == nil || l.every > 0 && seq%l.every == 0 {
		o.x = append(o.x[:0], x...)
		return slices.Clone(x), nil
	}
	q := slices.Clone(x)
	merge.Axpy(q, -1, o.x)
	packed = new(compress.Payload)
	compress.Compress(packed, q, l.spec, n.rng)
	compress.Decompress(q, packed)
	merge.Axpy(o.x, 1, q)
	return nil, packed
}

// sent is the link's copy as of its last message (nil: none).
func (l *links) sent(to PeerID) []float32 {
	if o := l.out[to]; o != nil {
		return o.x
	}
	return nil
}

// rekey makes the next message on the link a keyframe (the peer missed
// one).
func (l *links) rekey(to PeerID) {
	if o := l.out[to]; o != nil {
		o.x = nil
	}
}

// receive applies a message to the sender's copy and returns the copy
// if it is good.
func (l *links) receive(n *Core, m *Message) []float32 {
	in := l.in[m.From]
	if in == nil {
		in = &linkCopy{stale: true}
		l.in[m.From] = in
	}
	switch {
	case m.keyframe:
		if l.resets && m.Round == 1 && in.seq > 0 {
			// A reset: the sender has no good copy of this node's either.
			if o := l.out[m.From]; o != nil {
				o.x = nil
			}
		}
		if l.resets && m.Round == 1 || m.Round > in.seq || in.stale {
			in.x = n.copyIn(in.x, m.Params)
			in.seq, in.stale = m.Round, false
		}
	case in.stale || m.Round <= in.seq:
		// Waiting for a keyframe, or a step already applied.
	case m.Round == in.seq+1:
		in.x = n.stepIn(in.x, m.Params)
		in.seq++
	default:
		n.trace("choco-gap", m.From, "missed compressed steps: the link resets", float64(m.Round-in.seq))
		in.stale = true
	}
	if in.stale {
		return nil
	}
	return in.x
}

// average moves x towards the peer's copy: x + γ·½·(x̂_{j→i} − x̂_{i→j}),
// in place, or in a new vector the Mixer makes where the core hands its
// mixes; it returns the result.
func (l *links) average(n *Core, x, theirs []float32, from PeerID) []float32 {
	o := l.out[from]
	if theirs == nil || o == nil || o.x == nil {
		return x
	}
	w := float32(l.gamma / 2)
	if n.cfg.HandsMixes() { // the same sums in the same order
		return n.mixed([][]float32{x, theirs, o.x}, []float32{1, w, -w}, nil, 0)
	}
	merge.Axpy(x, w, theirs)
	merge.Axpy(x, -w, o.x)
	return x
}

// prune forgets the links to peers that are no longer neighbours.
func (l *links) prune(nbs []Neighbor) {
	for p := range l.out {
		if !isNeighbor(nbs, p) {
			delete(l.out, p)
		}
	}
	for p := range l.in {
		if !isNeighbor(nbs, p) {
			delete(l.in, p)
		}
	}
}

// isNeighbor reports whether p is one of nbs.
func isNeighbor(nbs []Neighbor, p PeerID) bool {
	return slices.ContainsFunc(nbs, func(nb Neighbor) bool { return nb.ID == p })
}
