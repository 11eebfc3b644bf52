package secagg

import (
	"errors"
	"fmt"
	"io"
)

// Shamir's secret sharing over GF(2⁸) (the AES field, x⁸+x⁴+x³+x+1):
// each byte of the secret is the constant term of its own random
// polynomial of degree t−1, and share x holds the polynomials' values at
// x (1…255). Any t shares give the secret back; fewer give no
// information about it.

// ErrShares marks shares that cannot, or do not consistently, give a
// secret back.
var ErrShares = errors.New("secagg: shares do not reconstruct")

// Share is one share of a secret: the x coordinate (1…255) and the
// polynomials' values there, one byte per secret byte.
type Share struct {
	X byte
	Y []byte
}

// MaxShares is the most shares a secret can have (the field's nonzero
// elements).
const MaxShares = 255

// Split shares secret among n holders so that any t of them can rebuild
// it (1 ≤ t ≤ n ≤ MaxShares), drawing the polynomials from rand.
func Split(secret []byte, n, t int, rand io.Reader) ([]Share, error) {
	if t < 1 || n < t || n > MaxShares || len(secret) == 0 {
		return nil, fmt.Errorf("secagg: %d-of-%d shares of %d bytes", t, n, len(secret))
	}
	coef := make([]byte, len(secret)*(t-1))
	if _, err := io.ReadFull(rand, coef); err != nil {
		return nil, fmt.Errorf("secagg: shares: %w", err)
	}
	shares := make([]Share, n)
	for i := range shares {
		x := byte(i + 1)
		y := make([]byte, len(secret))
		for b, s := range secret {
			// Horner: ((c_{t−1}·x + c_{t−2})·x + …)·x + s.
			acc := byte(0)
			for k := t - 2; k >= 0; k-- {
				acc = gfMul(acc, x) ^ coef[b*(t-1)+k]
			}
			y[b] = gfMul(acc, x) ^ s
		}
		shares[i] = Share{X: x, Y: y}
	}
	return shares, nil
}

// Combine rebuilds a secret from at least t shares with distinct nonzero
// x. Beyond the first t, every further share must lie on the same
// polynomials, or the shares are refused (a corrupt or forged share).
func Combine(shares []Share, t int) ([]byte, error) {
	if t < 1 || len(shares) < t {
		return nil, fmt.Errorf("%w: %d shares, %d needed", ErrShares, len(shares), t)
	}
	size := len(shares[0].Y)
	seen := map[byte]bool{}
	for _, s := range shares {
		if s.X == 0 || seen[s.X] || len(s.Y) != size || size == 0 {
			return nil, fmt.Errorf("%w: share x=%d of %d bytes (x must be distinct and nonzero, lengths equal)", ErrShares, s.X, len(s.Y))
		}
		seen[s.X] = true
	}
	base := shares[:t]
	secret := interpolate(base, 0)
	for _, s := range shares[t:] {
		if y := interpolate(base, s.X); string(y) != string(s.Y) {
			return nil, fmt.Errorf("%w: share x=%d does not lie on the others' polynomial", ErrShares, s.X)
		}
	}
	return secret, nil
}

// interpolate evaluates, at x, the polynomials through the shares
// (Lagrange).
func interpolate(shares []Share, x byte) []byte {
	out := make([]byte, len(shares[0].Y))
	for i, si := range shares {
		// l_i(x) = Π_{j≠i} (x − x_j)/(x_i − x_j); subtraction is XOR.
		num, den := byte(1), byte(1)
		for j, sj := range shares {
			if j != i {
				num = gfMul(num, x^sj.X)
				den = gfMul(den, si.X^sj.X)
			}
		}
		l := gfMul(num, gfInv(den))
		for b, y := range si.Y {
			out[b] ^= gfMul(l, y)
		}
	}
	return out
}

// MarshalBinary writes the share as x followed by its bytes.
func (s Share) MarshalBinary() ([]byte, error) {
	return append([]byte{s.X}, s.Y...), nil
}

// UnmarshalBinary reads what MarshalBinary writes.
func (s *Share) UnmarshalBinary(b []byte) error {
	if len(b) < 2 || b[0] == 0 {
		return fmt.Errorf("%w: a share of %d bytes with x=%d (want x ≠ 0 and at least one byte)", ErrShares, len(b), firstByte(b))
	}
	s.X, s.Y = b[0], append([]byte(nil), b[1:]...)
	return nil
}

func firstByte(b []byte) int {
	if len(b) == 0 {
		return -1
	}
	return int(b[0])
}

// GF(2⁸) by log and exp tables over the generator 3. The lookups are
// indexed by secret bytes, so they are not constant-time: a process
// sharing the CPU's cache with a member could learn from their timing.
// The shares are made and combined once per round, not in a loop an
// attacker can drive.
var gfExp, gfLog = func() (e [510]byte, l [256]byte) {
	x := byte(1)
	for i := range 255 {
		e[i], e[i+255] = x, x
		l[x] = byte(i)
		x = xtime(x) ^ x // x·3
	}
	return e, l
}()

// xtime multiplies by x (2) modulo the AES polynomial.
func xtime(a byte) byte {
	if a&0x80 != 0 {
		return a<<1 ^ 0x1b
	}
	return a << 1
}

func gfMul(a, b byte) byte {
	if a == 0 || b == 0 {
		return 0
	}
	return gfExp[int(gfLog[a])+int(gfLog[b])]
}

func gfInv(a byte) byte {
	if a == 0 {
		panic("secagg: inverse of 0 in GF(2^8)")
	}
	return gfExp[255-int(gfLog[a])]
}
