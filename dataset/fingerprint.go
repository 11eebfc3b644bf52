package dataset

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"math"
	"slices"
)

// Fingerprint is a content hash of a dataset's examples: the SHA-256 of
// the sorted SHA-256s of its rows (each row's raw feature bits and label),
// so the same examples give the same fingerprint in any order, and any
// other example, feature value or label gives another. The daemon keys its
// privacy ledger by the fingerprint of the data it trains on (taken before
// scaling, so a change of --scale is the same data).
func Fingerprint(d *Dataset) string {
	rows := make([][sha256.Size]byte, d.N)
	buf := make([]byte, 0, 4*d.D+8)
	for i := range d.N {
		buf = buf[:0]
		for _, v := range d.Row(i) {
			buf = binary.LittleEndian.AppendUint32(buf, math.Float32bits(v))
		}
		buf = binary.LittleEndian.AppendUint32(buf, uint32(d.Y[i]))
		rows[i] = sha256.Sum256(buf)
	}
	slices.SortFunc(rows, func(a, b [sha256.Size]byte) int { return bytes.Compare(a[:], b[:]) })
	h := sha256.New()
	binary.Write(h, binary.LittleEndian, [2]uint64{uint64(d.N), uint64(d.D)})
	for _, r := range rows {
		h.Write(r[:])
	}
	return hex.EncodeToString(h.Sum(nil))
}
