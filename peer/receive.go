package peer

import (
	"fmt"
	"slices"

	"github.com/gossipd/gossipd/gossip"
)

// Envelope is a message as it arrives: the encoded bytes, and what the
// transport vouches for.
type Envelope struct {
	// From is the sender as the transport authenticated it.
	From gossip.PeerID
	// Job is the job the frame says it belongs to.
	Job [32]byte
	// Kind is the message kind the frame says it carries.
	Kind gossip.Kind
	// Payload is the encoded message (gossip.Encode). The decoded message
	// borrows its vectors from it, so the caller must not reuse it while
	// the core keeps them (Receive's kept).
	Payload []byte
	// Authenticated says the transport verified every byte with a MAC (an
	// AEAD channel): the message's own checksum is then not checked.
	Authenticated bool
}

// Receive decodes and validates an arriving message and hands it to the
// core. Everything that arrives goes through here, in the daemon and in
// the simulator alike; what fails a check is dropped, and a Reject in
// the result's Do says why.
func (p *Peer) Receive(e Envelope) Received {
	stepped, kept := p.receive(e)
	return Received{Stepped: stepped, Kept: kept, Do: p.take()}
}

// Received is what became of an arriving message: Stepped says it
// reached the core (which may still drop it, after its own checks); Kept
// says the core kept memory of the payload, which the caller must then
// leave alone (when false the payload may be reused at once); Do is what
// the world is to do, in order.
type Received struct {
	Stepped, Kept bool
	Do            []Do
}

func (p *Peer) receive(e Envelope) (stepped, kept bool) {
	if e.Job != p.cfg.Job {
		p.reject("wrong_job", e.From, fmt.Errorf("job %x…, this peer runs %x…", e.Job[:6], p.cfg.Job[:6]))
		return false, false
	}
	if !p.admits(e.From) {
		return false, false
	}
	m, err := gossip.Decode(e.Payload, gossip.DecodeLimits{MaxBytes: p.cfg.MaxBytes, Borrow: true, SkipChecksum: e.Authenticated})
	if err != nil {
		p.reject("undecodable", e.From, err)
		return false, false
	}
	if !p.authentic(e.From, m) {
		return false, false
	}
	if m.Kind != e.Kind {
		p.reject("kind_mismatch", e.From, fmt.Errorf("frame says %s, message %s", e.Kind, m.Kind))
		return false, false
	}
	return true, p.step(m)
}

// Deliver hands the core a message that arrived in memory, already
// decoded (a simulation without the wire codec). It applies the same
// checks as Receive but for those of the encoding.
func (p *Peer) Deliver(from gossip.PeerID, m *gossip.Message) Received {
	if !p.admits(from) || !p.authentic(from, m) {
		return Received{Do: p.take()}
	}
	kept := p.step(m)
	return Received{Stepped: true, Kept: kept, Do: p.take()}
}

// admits checks the sender against the job's members.
func (p *Peer) admits(from gossip.PeerID) bool {
	if len(p.cfg.Members) == 0 {
		return true
	}
	if _, ok := slices.BinarySearch(p.cfg.Members, from); ok {
		return true
	}
	p.reject("not_member", from, fmt.Errorf("%s is not among the job's members", from))
	return false
}

// authentic checks that the message claims the sender the transport
// authenticated.
func (p *Peer) authentic(from gossip.PeerID, m *gossip.Message) bool {
	if m.From == from {
		return true
	}
	p.reject("spoofed_sender", from, fmt.Errorf("message from %s claims to be from %s", from, m.From))
	return false
}

// step hands a checked message to the core and reports whether the core
// kept its memory.
func (p *Peer) step(m *gossip.Message) bool {
	m.To = p.core.ID()
	p.core.Step(m)
	kept := p.core.Kept()
	p.flush()
	return kept
}
