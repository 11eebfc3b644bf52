package secagg

import (
	"crypto/aes"
	"crypto/cipher"
	"encoding/binary"
	"fmt"
)

// Seed keys a mask: the AES-256-CTR keystream under it (zero IV), read
// as little-endian 32-bit words, is the mask.
type Seed [32]byte

// maskChunk is how many words a mask expands at a time.
const maskChunk = 1024

// AddMask adds the mask of seed to v (sign +1) or subtracts it (sign −1),
// modulo 2³².
func AddMask(v []uint32, seed Seed, sign int) {
	if sign != 1 && sign != -1 {
		panic(fmt.Sprintf("secagg: mask sign %d", sign))
	}
	block, err := aes.NewCipher(seed[:])
	if err != nil {
		panic(err) // a 32-byte key is always valid
	}
	stream := cipher.NewCTR(block, make([]byte, aes.BlockSize))
	buf := make([]byte, 4*min(maskChunk, len(v)))
	for lo := 0; lo < len(v); lo += maskChunk {
		part := v[lo:min(len(v), lo+maskChunk)]
		b := buf[:4*len(part)]
		clear(b)
		stream.XORKeyStream(b, b)
		for i := range part {
			m := binary.LittleEndian.Uint32(b[4*i:])
			if sign > 0 {
				part[i] += m
			} else {
				part[i] -= m
			}
		}
	}
}
