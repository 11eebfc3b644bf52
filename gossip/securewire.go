package gossip

import (
	"encoding/binary"
	"fmt"
	"maps"
	"math"
	"slices"

	"github.com/gossipd/gossipd/privacy/secagg"
)

// SecureAgg is the payload of a secure-aggregation message (the
// KindSec* kinds; privacy/secagg's exchanges): the receiver whose round
// it belongs to, and the one part its kind carries.
type SecureAgg struct {
	Receiver PeerID
	Advert   secagg.Advert  // KindSecAdvert
	Roster   secagg.Roster  // KindSecRoster
	Dealt    secagg.Dealt   // KindSecDealt
	Relay    secagg.Relay   // KindSecRelay
	Masked   []uint32       // KindSecMasked
	Request  secagg.Request // KindSecRequest
	Reveal   secagg.Reveal  // KindSecReveal
}

// Secure reports whether messages of kind k belong to secure
// aggregation.
func (k Kind) Secure() bool { return k >= KindSecAdvert && k <= KindSecReveal }

// Bounds of the secure section's parts (the rest is bounded by the
// message's bytes).
const (
	maxSecureKey    = 64   // an X25519 public key has 32 bytes
	maxSecureSealed = 4096 // two shares of a 32-byte secret, sealed: 98 bytes
	maxSecureSig    = 1024 // an Ed25519 signature has 64 bytes, an RSA-4096 one 512
)

// The secure section, after the packed vector: u32 length (0: none),
// then receiver (u16 len + bytes) and the part of the message's kind:
//
//	advert:  mask key, channel key, signature (u16 len + bytes each; no signature: len 0)
//	roster:  u16 members, each { id, mask key, channel key, signature }; u16 threshold
//	dealt:   u16 count, each sealed (u16 len + bytes)
//	relay:   u16 count, each { u16 dealer, sealed }
//	masked:  u32 count + u32s
//	request: u16 count + u16 survivors
//	reveal:  u16 self count, each { u16 member, u8 x, u16 len + y }; the same for key shares

func secureSize(m *Message) int {
	s := m.Secure
	if s == nil {
		return 0
	}
	n := 2 + len(s.Receiver)
	switch m.Kind {
	case KindSecAdvert:
		n += 6 + len(s.Advert.MaskKey) + len(s.Advert.ChannelKey) + len(s.Advert.Sig)
	case KindSecRoster:
		n += 4
		for i, id := range s.Roster.Members {
			n += 8 + len(id) + len(s.Roster.MaskKeys[i]) + len(s.Roster.ChannelKeys[i]) + len(rosterSig(s.Roster, i))
		}
	case KindSecDealt:
		n += 2
		for _, x := range s.Dealt.Sealed {
			n += 2 + len(x)
		}
	case KindSecRelay:
		n += 2
		for _, x := range s.Relay.Sealed {
			n += 4 + len(x)
		}
	case KindSecMasked:
		n += 4 + 4*len(s.Masked)
	case KindSecRequest:
		n += 2 + 2*len(s.Request.Survivors)
	case KindSecReveal:
		n += 4
		for _, sh := range s.Reveal.Self {
			n += 5 + len(sh.Y)
		}
		for _, sh := range s.Reveal.Key {
			n += 5 + len(sh.Y)
		}
	}
	return n
}

// checkSecure refuses a secure payload the encoding cannot carry.
func checkSecure(m *Message) error {
	s := m.Secure
	if s == nil {
		if m.Kind.Secure() {
			return fmt.Errorf("%w: a %s message without its payload", ErrWire, m.Kind)
		}
		return nil
	}
	bad := func(what string) error { return fmt.Errorf("%w: secure aggregation: %s", ErrWire, what) }
	if !m.Kind.Secure() {
		return bad("a payload on a " + m.Kind.String() + " message")
	}
	small := func(b []byte, max int) bool { return len(b) <= max }
	switch {
	case len(s.Receiver) > math.MaxUint16:
		return bad("receiver ID too long")
	case !small(s.Advert.MaskKey, maxSecureKey) || !small(s.Advert.ChannelKey, maxSecureKey) || !small(s.Advert.Sig, maxSecureSig):
		return bad("advert key or signature too long")
	case len(s.Roster.Members) > secagg.MaxShares || len(s.Roster.MaskKeys) != len(s.Roster.Members) || len(s.Roster.ChannelKeys) != len(s.Roster.Members) ||
		(s.Roster.Sigs != nil && len(s.Roster.Sigs) != len(s.Roster.Members)) || s.Roster.Threshold < 0 || s.Roster.Threshold > math.MaxUint16:
		return bad("roster")
	case len(s.Dealt.Sealed) > secagg.MaxShares || len(s.Relay.Sealed) > secagg.MaxShares || len(s.Relay.Dealers) != len(s.Relay.Sealed):
		return bad("sealed shares")
	case len(s.Request.Survivors) > secagg.MaxShares || len(s.Reveal.Self) > secagg.MaxShares || len(s.Reveal.Key) > secagg.MaxShares:
		return bad("member lists")
	case uint64(len(s.Masked)) > math.MaxUint32:
		return bad("masked vector")
	}
	for i, id := range s.Roster.Members {
		if len(id) > math.MaxUint16 || !small(s.Roster.MaskKeys[i], maxSecureKey) || !small(s.Roster.ChannelKeys[i], maxSecureKey) || !small(rosterSig(s.Roster, i), maxSecureSig) {
			return bad("roster entry")
		}
	}
	for _, x := range append(append([]secagg.Sealed{}, s.Dealt.Sealed...), s.Relay.Sealed...) {
		if !small(x, maxSecureSealed) {
			return bad("sealed shares too long")
		}
	}
	for _, i := range append(append([]int{}, s.Relay.Dealers...), s.Request.Survivors...) {
		if i < 0 || i >= secagg.MaxShares {
			return bad("member index")
		}
	}
	for _, sh := range [2]map[int]secagg.Share{s.Reveal.Self, s.Reveal.Key} {
		for i, v := range sh {
			if i < 0 || i >= secagg.MaxShares || len(v.Y) > maxSecureKey {
				return bad("revealed share")
			}
		}
	}
	return nil
}

// rosterSig is member i's signature in r (nil where none).
func rosterSig(r secagg.Roster, i int) []byte {
	if r.Sigs == nil {
		return nil
	}
	return r.Sigs[i]
}

func appendBytes16(b, p []byte) []byte {
	b = binary.LittleEndian.AppendUint16(b, uint16(len(p)))
	return append(b, p...)
}

// appendSecure appends m's secure section (checkSecure passed).
func appendSecure(b []byte, m *Message) []byte {
	s := m.Secure
	if s == nil {
		return binary.LittleEndian.AppendUint32(b, 0)
	}
	b = binary.LittleEndian.AppendUint32(b, uint32(secureSize(m)))
	b = appendString(b, s.Receiver)
	switch m.Kind {
	case KindSecAdvert:
		b = appendBytes16(appendBytes16(appendBytes16(b, s.Advert.MaskKey), s.Advert.ChannelKey), s.Advert.Sig)
	case KindSecRoster:
		b = binary.LittleEndian.AppendUint16(b, uint16(len(s.Roster.Members)))
		for i, id := range s.Roster.Members {
			b = appendBytes16(appendBytes16(appendString(b, id), s.Roster.MaskKeys[i]), s.Roster.ChannelKeys[i])
			b = appendBytes16(b, rosterSig(s.Roster, i))
		}
		b = binary.LittleEndian.AppendUint16(b, uint16(s.Roster.Threshold))
	case KindSecDealt:
		b = binary.LittleEndian.AppendUint16(b, uint16(len(s.Dealt.Sealed)))
		for _, x := range s.Dealt.Sealed {
			b = appendBytes16(b, x)
		}
	case KindSecRelay:
		b = binary.LittleEndian.AppendUint16(b, uint16(len(s.Relay.Sealed)))
		for k, x := range s.Relay.Sealed {
			b = appendBytes16(binary.LittleEndian.AppendUint16(b, uint16(s.Relay.Dealers[k])), x)
		}
	case KindSecMasked:
		b = binary.LittleEndian.AppendUint32(b, uint32(len(s.Masked)))
		for _, v := range s.Masked {
			b = binary.LittleEndian.AppendUint32(b, v)
		}
	case KindSecRequest:
		b = binary.LittleEndian.AppendUint16(b, uint16(len(s.Request.Survivors)))
		for _, i := range s.Request.Survivors {
			b = binary.LittleEndian.AppendUint16(b, uint16(i))
		}
	case KindSecReveal:
		for _, sh := range [2]map[int]secagg.Share{s.Reveal.Self, s.Reveal.Key} {
			b = binary.LittleEndian.AppendUint16(b, uint16(len(sh)))
			for _, i := range slices.Sorted(maps.Keys(sh)) {
				b = binary.LittleEndian.AppendUint16(b, uint16(i))
				b = appendBytes16(append(b, sh[i].X), sh[i].Y)
			}
		}
	}
	return b
}

// bytes16 reads a u16-length byte string of at most max bytes (a copy).
func (d *decoder) bytes16(max int, what string) []byte {
	n := d.u16(what)
	if n > max {
		d.fail(what)
		return nil
	}
	return append([]byte(nil), d.take(n, what)...)
}

// secure reads m's secure section of n bytes.
func (d *decoder) secure(m *Message, n int) {
	end := d.off + n
	if n == 0 {
		if m.Kind.Secure() {
			d.fail(m.Kind.String() + " payload")
		}
		return
	}
	if !m.Kind.Secure() {
		d.fail("secure section on a " + m.Kind.String() + " message")
		return
	}
	s := &SecureAgg{Receiver: PeerID(d.str("receiver"))}
	count := func(what string) int {
		c := d.u16(what)
		if c > secagg.MaxShares {
			d.fail(what)
			return 0
		}
		return c
	}
	switch m.Kind {
	case KindSecAdvert:
		s.Advert.MaskKey, s.Advert.ChannelKey = d.bytes16(maxSecureKey, "mask key"), d.bytes16(maxSecureKey, "channel key")
		if s.Advert.Sig = d.bytes16(maxSecureSig, "advert signature"); len(s.Advert.Sig) == 0 {
			s.Advert.Sig = nil
		}
	case KindSecRoster:
		c := count("roster size")
		signed := false
		for i := 0; i < c && d.err == nil; i++ {
			s.Roster.Members = append(s.Roster.Members, d.str("roster member"))
			s.Roster.MaskKeys = append(s.Roster.MaskKeys, d.bytes16(maxSecureKey, "roster mask key"))
			s.Roster.ChannelKeys = append(s.Roster.ChannelKeys, d.bytes16(maxSecureKey, "roster channel key"))
			sig := d.bytes16(maxSecureSig, "roster signature")
			s.Roster.Sigs = append(s.Roster.Sigs, sig)
			signed = signed || len(sig) > 0
		}
		if !signed {
			s.Roster.Sigs = nil // no member signed: as the receiver built it
		}
		s.Roster.Threshold = d.u16("threshold")
	case KindSecDealt:
		c := count("sealed count")
		for i := 0; i < c && d.err == nil; i++ {
			s.Dealt.Sealed = append(s.Dealt.Sealed, d.bytes16(maxSecureSealed, "sealed shares"))
		}
	case KindSecRelay:
		c := count("relay count")
		for i := 0; i < c && d.err == nil; i++ {
			s.Relay.Dealers = append(s.Relay.Dealers, d.u16("dealer"))
			s.Relay.Sealed = append(s.Relay.Sealed, d.bytes16(maxSecureSealed, "relayed shares"))
		}
	case KindSecMasked:
		s.Masked = d.u32s(d.u32("masked count"), "masked vector")
	case KindSecRequest:
		c := count("survivor count")
		for i := 0; i < c && d.err == nil; i++ {
			s.Request.Survivors = append(s.Request.Survivors, d.u16("survivor"))
		}
	case KindSecReveal:
		for part := range 2 {
			c := count("revealed count")
			sh := map[int]secagg.Share{}
			prev := -1
			for i := 0; i < c && d.err == nil; i++ {
				k := d.u16("revealed member")
				x := d.take(1, "share x")
				y := d.bytes16(maxSecureKey, "share y")
				if k <= prev || d.err != nil { // ascending, as encoded
					d.fail("revealed shares")
					break
				}
				prev = k
				sh[k] = secagg.Share{X: x[0], Y: y}
			}
			if part == 0 {
				s.Reveal.Self = sh
			} else {
				s.Reveal.Key = sh
			}
		}
	}
	if d.err == nil && d.off != end {
		d.fail("secure section length")
	}
	m.Secure = s
}
