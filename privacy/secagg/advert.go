package secagg

import (
	"encoding/binary"
	"fmt"
)

// advertContext prefixes what a member signs, so that an advert's
// signature cannot be taken for any other signed message.
const advertContext = "gossipd secure advert v1\n"

// AdvertMessage is what member signs of its advert to receiver's round
// of job: the round and both parties bound to the two keys.
func AdvertMessage(job string, round uint64, receiver, member string, maskKey, channelKey []byte) []byte {
	b := []byte(advertContext)
	for _, s := range []string{job, receiver, member} {
		b = binary.BigEndian.AppendUint32(b, uint32(len(s)))
		b = append(b, s...)
	}
	b = binary.BigEndian.AppendUint64(b, round)
	for _, k := range [][]byte{maskKey, channelKey} {
		b = binary.BigEndian.AppendUint32(b, uint32(len(k)))
		b = append(b, k...)
	}
	return b
}

// VerifyAdverts checks, for a member (self) about to deal into receiver's
// round, every other member's signature of the keys the roster gives it,
// with verify (the member's identity key): a receiver that swapped a
// member's keys for its own, to read the shares sealed for that member,
// is caught here.
func (r Roster) VerifyAdverts(job string, round uint64, receiver, self string, verify func(member string, msg, sig []byte) error) error {
	if len(r.Sigs) != len(r.Members) || len(r.MaskKeys) != len(r.Members) || len(r.ChannelKeys) != len(r.Members) {
		return fmt.Errorf("%w: a roster of %d members with %d signatures", ErrMessage, len(r.Members), len(r.Sigs))
	}
	for i, m := range r.Members {
		if m == self {
			continue
		}
		if err := verify(m, AdvertMessage(job, round, receiver, m, r.MaskKeys[i], r.ChannelKeys[i]), r.Sigs[i]); err != nil {
			return fmt.Errorf("%w: the roster's keys for %s are not signed by it: %w", ErrMessage, m, err)
		}
	}
	return nil
}
