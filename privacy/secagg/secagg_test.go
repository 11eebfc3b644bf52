package secagg

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// seeded is a deterministic byte source for tests (the daemon uses
// crypto/rand).
func seeded(seed uint64) *rand.ChaCha8 {
	var s [32]byte
	s[0], s[1] = byte(seed), byte(seed>>8)
	return rand.NewChaCha8(s)
}

func TestRingRoundTrip(t *testing.T) {
	r := Ring{}.WithDefaults()
	if err := r.Validate(8); err != nil {
		t.Fatal(err)
	}
	x := []float32{0, 1e-7, -0.3, 12.5, -63.99, 64, 100, -100, float32(math.NaN())}
	enc := make([]uint32, len(x))
	if c := r.Encode(enc, x, 1); c != 3 {
		t.Fatalf("%d values clipped, want 3 (100, -100, NaN)", c)
	}
	dec := make([]float32, len(x))
	r.Decode(dec, enc)
	want := []float64{0, 0, -0.3, 12.5, -63.99, 64, 64, -64, 0}
	for i, w := range want {
		if math.Abs(float64(dec[i])-w) > 0.5/r.Scale+1e-6*math.Abs(w) {
			t.Errorf("value %d: %v decodes to %v, want %v", i, x[i], dec[i], w)
		}
	}
	// The sum wraps modulo 2³² and decodes exactly while it fits.
	n := r.MaxTerms()
	if err := r.Validate(n + 1); !errors.Is(err, ErrParams) {
		t.Errorf("a sum of %d terms (max %d): %v", n+1, n, err)
	}
	one := make([]uint32, 1)
	r.Encode(one, []float32{-64}, 1)
	sum := make([]uint32, 1)
	for range n {
		Add(sum, one)
	}
	r.Decode(dec[:1], sum)
	if got, w := float64(dec[0]), -64*float64(n); math.Abs(got-w) > 1e-6*math.Abs(w) {
		t.Errorf("the sum of %d × −64 decodes to %v", n, got)
	}
	for _, bad := range []Ring{{Scale: 0, Clip: 1}, {Scale: 1, Clip: -1}, {Scale: 1e-3, Clip: 1}, {Scale: math.Inf(1), Clip: 1}} {
		if err := bad.Validate(2); !errors.Is(err, ErrParams) {
			t.Errorf("%+v: %v", bad, err)
		}
	}
}

func TestShamir(t *testing.T) {
	rng := seeded(1)
	secret := []byte("a 32-byte private key, say .....")
	const n, th = 6, 3
	shares, err := Split(secret, n, th, rng)
	if err != nil {
		t.Fatal(err)
	}
	// Every t-subset rebuilds the secret; with every further share too.
	for a := range n {
		for b := a + 1; b < n; b++ {
			for c := b + 1; c < n; c++ {
				got, err := Combine([]Share{shares[a], shares[b], shares[c]}, th)
				if err != nil || !bytes.Equal(got, secret) {
					t.Fatalf("shares %d,%d,%d: %q, %v", a, b, c, got, err)
				}
			}
		}
	}
	if got, err := Combine(shares, th); err != nil || !bytes.Equal(got, secret) {
		t.Fatalf("all shares: %q, %v", got, err)
	}
	// t−1 shares say nothing: as a (t−1)-threshold they give another value.
	if got, _ := Combine(shares[:th-1], th-1); bytes.Equal(got, secret) {
		t.Fatal("t−1 shares gave the secret")
	}
	if _, err := Combine(shares[:th-1], th); !errors.Is(err, ErrShares) {
		t.Errorf("t−1 shares: %v", err)
	}
	// A corrupt share among more than t is caught.
	bad := slices.Clone(shares)
	bad[4] = Share{X: bad[4].X, Y: slices.Clone(bad[4].Y)}
	bad[4].Y[7] ^= 1
	if _, err := Combine(bad, th); !errors.Is(err, ErrShares) {
		t.Errorf("a corrupt fifth share: %v", err)
	}
	dup := []Share{shares[0], shares[0], shares[1]}
	if _, err := Combine(dup, th); !errors.Is(err, ErrShares) {
		t.Errorf("a repeated share: %v", err)
	}
	// The wire form round-trips.
	b, _ := shares[2].MarshalBinary()
	var s Share
	if err := s.UnmarshalBinary(b); err != nil || s.X != shares[2].X || !bytes.Equal(s.Y, shares[2].Y) {
		t.Errorf("round trip: %+v, %v", s, err)
	}
	for _, b := range [][]byte{nil, {1}, {0, 5}} {
		if err := s.UnmarshalBinary(b); !errors.Is(err, ErrShares) {
			t.Errorf("share %v: %v", b, err)
		}
	}
}

func TestAgree(t *testing.T) {
	rng := seeded(2)
	a, _ := NewKeyPair(rng)
	b, _ := NewKeyPair(rng)
	c := Context{Job: "j", Round: 3, Receiver: "r", A: "a", B: "b"}
	sa, err1 := a.Agree(b.Public(), c)
	c2 := c
	c2.A, c2.B = c.B, c.A // the other member's view of the pair
	sb, err2 := b.Agree(a.Public(), c2)
	if err1 != nil || err2 != nil || sa != sb {
		t.Fatalf("the two members' seeds differ (%v, %v)", err1, err2)
	}
	for _, other := range []Context{{Job: "j", Round: 4, Receiver: "r", A: "a", B: "b"}, {Job: "j", Round: 3, Receiver: "s", A: "a", B: "b"}, {Job: "k", Round: 3, Receiver: "r", A: "a", B: "b"}} {
		if s, _ := a.Agree(b.Public(), other); s == sa {
			t.Errorf("context %+v gives the same seed", other)
		}
	}
	if _, err := a.Agree(make([]byte, 32), c); !errors.Is(err, ErrKey) {
		t.Errorf("a low-order public key: %v", err)
	}
	if _, err := a.Agree([]byte{1, 2}, c); !errors.Is(err, ErrKey) {
		t.Errorf("a short public key: %v", err)
	}
}

// round runs one masked round of a group of n with the given members
// dropping out after the others masked against them, and returns the
// decoded sum and the plain weighted sum of the survivors.
func round(t *testing.T, n, th int, drop []int, dim int, seed uint64) (got, want []float32, err error) {
	t.Helper()
	rng := seeded(seed)
	vals := rand.New(rand.NewPCG(seed, 9))
	g := Group{Job: "job", Round: seed, Receiver: "recv", Threshold: th}
	for i := range n {
		g.Members = append(g.Members, fmt.Sprintf("peer-%02d", i))
	}
	if err := g.Validate(); err != nil {
		t.Fatal(err)
	}
	ring := Ring{}.WithDefaults()
	secrets := make([]*Secrets, n)
	publics := make([][]byte, n)
	keyShares, selfShares := map[int][]Share{}, map[int][]Share{}
	held := make([][2][]Share, n)  // member j's shares of everyone's key and seed
	deals := make([][2][]Share, n) // member i's shares of its key and seed, one per member
	for i := range n {
		s, err := NewSecrets(rng)
		if err != nil {
			t.Fatal(err)
		}
		secrets[i], publics[i] = s, s.Key.Public()
		ks, ss, err := g.Deal(s, rng)
		if err != nil {
			t.Fatal(err)
		}
		deals[i] = [2][]Share{ks, ss}
	}
	// Each member seals its shares for every other member; the receiver
	// relays them; each member opens those for it.
	for i := range n {
		for j := range n {
			if i == j {
				held[j][0] = append(held[j][0], deals[i][0][j])
				held[j][1] = append(held[j][1], deals[i][1][j])
				continue
			}
			sealed, err := g.Seal(i, j, secrets[i].Channel, secrets[j].Channel.Public(), deals[i][0][j], deals[i][1][j])
			if err != nil {
				t.Fatal(err)
			}
			ks, ss, err := g.Open(i, j, secrets[j].Channel, secrets[i].Channel.Public(), sealed)
			if err != nil {
				t.Fatal(err)
			}
			held[j][0] = append(held[j][0], ks)
			held[j][1] = append(held[j][1], ss)
		}
	}
	dropped := map[int]bool{}
	for _, d := range drop {
		dropped[d] = true
	}
	sum := make([]uint32, dim)
	want = make([]float32, dim)
	var survivors []int
	for i := range n {
		x := make([]float32, dim)
		for k := range x {
			x[k] = float32(vals.NormFloat64())
		}
		w := 1 / float64(n)
		v := make([]uint32, dim)
		ring.Encode(v, x, w)
		if err := g.Mask(v, i, secrets[i], publics); err != nil {
			t.Fatal(err)
		}
		if dropped[i] {
			continue // masked, never delivered
		}
		survivors = append(survivors, i)
		Add(sum, v)
		for k := range want {
			want[k] += float32(w * float64(x[k]))
		}
	}
	// Each survivor hands in, for every member, the share of its self
	// seed if that member survived, else the share of its key: never both.
	if len(survivors) < th {
		if _, _, err := g.Reveal(survivors[0], heldBy(held, survivors[0]), survivors); !errors.Is(err, ErrTooFew) {
			t.Fatalf("Reveal with %d survivors: %v", len(survivors), err)
		}
	}
	for _, j := range survivors {
		if len(survivors) < th {
			break
		}
		ss, ks, err := g.Reveal(j, heldBy(held, j), survivors)
		if err != nil {
			t.Fatal(err)
		}
		for i := range n {
			_, hasSelf := ss[i]
			_, hasKey := ks[i]
			if hasSelf == hasKey || hasKey != dropped[i] {
				t.Fatalf("member %d revealed for %d: self share %v, key share %v (dropped %v)", j, i, hasSelf, hasKey, dropped[i])
			}
			if dropped[i] {
				keyShares[i] = append(keyShares[i], ks[i])
			} else {
				selfShares[i] = append(selfShares[i], ss[i])
			}
		}
	}
	rec, err := g.Recover(survivors, selfShares, keyShares)
	if err != nil {
		return nil, want, err
	}
	if err := g.Unmask(sum, survivors, rec, publics); err != nil {
		t.Fatal(err)
	}
	got = make([]float32, dim)
	ring.Decode(got, sum)
	return got, want, nil
}

// heldBy is member j's held shares of every member's key and seed.
func heldBy(held [][2][]Share, j int) [][2]Share {
	out := make([][2]Share, len(held[j][0]))
	for i := range out {
		out[i] = [2]Share{held[j][0][i], held[j][1][i]}
	}
	return out
}

// TestExactSumWithDropouts: the decoded sum equals the survivors' plain
// weighted sum within the quantisation error (k/(2·Scale) for k terms),
// with 0, 1 and n−t dropouts; with fewer survivors than t the round is
// refused (ErrTooFew), never decoded wrong.
func TestExactSumWithDropouts(t *testing.T) {
	const n, th, dim = 7, 4, 2000
	for _, drop := range [][]int{nil, {3}, {0, 5, 6}, {1, 2, 4, 6}} {
		got, want, err := round(t, n, th, drop, dim, uint64(len(drop)+1))
		if n-len(drop) < th {
			if !errors.Is(err, ErrTooFew) {
				t.Errorf("%d dropouts of %d, threshold %d: %v, want ErrTooFew", len(drop), n, th, err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("dropouts %v: %v", drop, err)
		}
		tol := float64(n-len(drop))/(2*DefaultScale) + 1e-6
		worst := 0.0
		for k := range want {
			worst = max(worst, math.Abs(float64(got[k]-want[k])))
		}
		if worst > tol {
			t.Errorf("dropouts %v: the decoded sum is %.3g off the plain one (tolerance %.3g)", drop, worst, tol)
		}
	}
}

// TestMaskedLooksUniform: what a receiver gets from one sender is, word
// for word, uniform on the ring (chi-square on the top byte, 255 degrees
// of freedom, below the 0.1% critical value 330.5) and uncorrelated with
// the sender's contribution, even for a contribution of one repeated
// value; without its mask the same words are far from uniform, and
// LooksUnmasked tells the two apart.
func TestMaskedLooksUniform(t *testing.T) {
	const n, dim = 4, 1 << 16
	rng := seeded(7)
	g := Group{Job: "job", Round: 1, Receiver: "recv", Members: []string{"a", "b", "c", "d"}, Threshold: 3}
	secrets := make([]*Secrets, n)
	publics := make([][]byte, n)
	for i := range n {
		secrets[i], _ = NewSecrets(rng)
		publics[i] = secrets[i].Key.Public()
	}
	ring := Ring{}.WithDefaults()
	vals := rand.New(rand.NewPCG(7, 7))
	for _, name := range []string{"constant", "random"} {
		x := make([]float32, dim)
		for k := range x {
			x[k] = 0.25
			if name == "random" {
				x[k] = float32(vals.NormFloat64())
			}
		}
		enc := make([]uint32, dim)
		ring.Encode(enc, x, 1)
		masked := slices.Clone(enc)
		if err := g.Mask(masked, 1, secrets[1], publics); err != nil {
			t.Fatal(err)
		}
		if chi := chiSquare(masked); chi > 330.5 {
			t.Errorf("%s: masked words: chi-square %.1f over 256 buckets", name, chi)
		}
		if chi := chiSquare(enc); chi < 1000 {
			t.Errorf("%s: the unmasked words pass as uniform (chi-square %.1f): the test cannot tell", name, chi)
		}
		// The receiver's check for contributions sent without masks
		// tells the two apart, over the whole vector and over every
		// window of 32 words.
		if !ring.LooksUnmasked(enc) || ring.LooksUnmasked(masked) {
			t.Errorf("%s: LooksUnmasked %v unmasked, %v masked", name, ring.LooksUnmasked(enc), ring.LooksUnmasked(masked))
		}
		for k := 0; k+MinUnmaskedCheck <= dim; k += MinUnmaskedCheck {
			if ring.LooksUnmasked(masked[k:k+MinUnmaskedCheck]) || !ring.LooksUnmasked(enc[k:k+MinUnmaskedCheck]) {
				t.Fatalf("%s: words %d..%d judged wrongly", name, k, k+MinUnmaskedCheck)
			}
		}
		if ring.LooksUnmasked(enc[:MinUnmaskedCheck-1]) {
			t.Errorf("%s: %d words judged, fewer than MinUnmaskedCheck", name, MinUnmaskedCheck-1)
		}
		if name == "random" {
			if r := correlation(masked, enc); math.Abs(r) > 4/math.Sqrt(dim) {
				t.Errorf("masked words correlate with the contribution: r = %.4f", r)
			}
		}
	}
}

func chiSquare(v []uint32) float64 {
	var count [256]float64
	for _, w := range v {
		count[w>>24]++
	}
	e := float64(len(v)) / 256
	chi := 0.0
	for _, c := range count {
		chi += (c - e) * (c - e) / e
	}
	return chi
}

func correlation(a, b []uint32) float64 {
	var sa, sb, saa, sbb, sab float64
	for i := range a {
		x, y := float64(int32(a[i])), float64(int32(b[i]))
		sa, sb, saa, sbb, sab = sa+x, sb+y, saa+x*x, sbb+y*y, sab+x*y
	}
	n := float64(len(a))
	return (sab/n - sa/n*sb/n) / math.Sqrt((saa/n-sa*sa/n/n)*(sbb/n-sb*sb/n/n))
}

func TestGroupValidate(t *testing.T) {
	for _, g := range []Group{
		{Members: []string{"a"}, Threshold: 1},
		{Members: []string{"a", "b"}, Threshold: 1},
		{Members: []string{"a", "b"}, Threshold: 3},
		{Members: []string{"b", "a"}, Threshold: 2},
		{Members: []string{"a", "a"}, Threshold: 2},
		{Members: []string{"a", "b", "c", "d"}, Threshold: 2}, // half: a lying receiver gets both shares
	} {
		if err := g.Validate(); err == nil {
			t.Errorf("%+v: no error", g)
		}
	}
	g := Group{Members: []string{"a", "b", "c", "d", "e"}, Threshold: 3}
	if err := g.Validate(); err != nil {
		t.Fatal(err)
	}
	held := make([][2]Share, 5)
	for _, bad := range [][]int{{0, 0, 1}, {2, 1, 0}, {0, 1, 9}, {1, 2, 3, 4}} {
		if _, _, err := g.Reveal(0, held, bad); err == nil {
			t.Errorf("Reveal by member 0 for survivors %v: no error", bad)
		}
	}
	r := &Recovered{Self: map[int]Seed{0: {}, 1: {}, 2: {}}, Dropped: map[int]*KeyPair{}}
	publics := make([][]byte, 5)
	if err := g.Unmask(make([]uint32, 4), []int{0, 1, 2}, r, publics); err == nil {
		t.Error("Unmask without the dropped members' keys: no error")
	}
}

// FuzzShare: a share's wire form never panics the decoder, and what it
// accepts writes back the same bytes.
func FuzzShare(f *testing.F) {
	f.Add([]byte{1, 2, 3})
	f.Add([]byte{0})
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		var s Share
		if err := s.UnmarshalBinary(b); err != nil {
			return
		}
		out, _ := s.MarshalBinary()
		if !bytes.Equal(out, b) {
			t.Fatalf("%x writes back as %x", b, out)
		}
	})
}

// TestSealedShares: sealed shares open only for their member, in their
// round, unaltered; the receiver that relays them (with keys of its own)
// cannot open them, nor can a rebuilt mask key.
func TestSealedShares(t *testing.T) {
	rng := seeded(11)
	g := Group{Job: "job", Round: 5, Receiver: "recv", Members: []string{"a", "b", "c"}, Threshold: 2}
	s := make([]*Secrets, 3)
	for i := range s {
		s[i], _ = NewSecrets(rng)
	}
	ks, ss, err := g.Deal(s[0], rng)
	if err != nil {
		t.Fatal(err)
	}
	sealed, err := g.Seal(0, 1, s[0].Channel, s[1].Channel.Public(), ks[1], ss[1])
	if err != nil {
		t.Fatal(err)
	}
	k, v, err := g.Open(0, 1, s[1].Channel, s[0].Channel.Public(), sealed)
	if err != nil || k.X != ks[1].X || !bytes.Equal(k.Y, ks[1].Y) || !bytes.Equal(v.Y, ss[1].Y) {
		t.Fatalf("open: %v", err)
	}
	receiver, _ := NewSecrets(rng)
	later := g
	later.Round++
	tampered := slices.Clone(sealed)
	tampered[len(tampered)/2] ^= 1
	for name, try := range map[string]func() error{
		"tampered":         func() error { _, _, err := g.Open(0, 1, s[1].Channel, s[0].Channel.Public(), tampered); return err },
		"another member":   func() error { _, _, err := g.Open(0, 2, s[2].Channel, s[0].Channel.Public(), sealed); return err },
		"another round":    func() error { _, _, err := later.Open(0, 1, s[1].Channel, s[0].Channel.Public(), sealed); return err },
		"the receiver":     func() error { _, _, err := g.Open(0, 1, receiver.Channel, s[0].Channel.Public(), sealed); return err },
		"the rebuilt key":  func() error { _, _, err := g.Open(0, 1, s[1].Key, s[0].Channel.Public(), sealed); return err },
		"the wrong sender": func() error { _, _, err := g.Open(2, 1, s[1].Channel, s[2].Channel.Public(), sealed); return err },
		"a truncated seal": func() error { _, _, err := g.Open(0, 1, s[1].Channel, s[0].Channel.Public(), sealed[:5]); return err },
	} {
		if err := try(); !errors.Is(err, ErrSealed) {
			t.Errorf("%s: %v, want ErrSealed", name, err)
		}
	}
}

// FuzzParseShares: an opened plaintext never panics the parser, and what
// it accepts holds two well-formed shares.
func FuzzParseShares(f *testing.F) {
	f.Add([]byte{2, 1, 9, 1, 9})
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01})
	f.Fuzz(func(t *testing.T, b []byte) {
		k, s, err := parseShares(b)
		if err != nil {
			return
		}
		if k.X == 0 || s.X == 0 || len(k.Y) == 0 || len(s.Y) == 0 {
			t.Fatalf("%x: accepted malformed shares %+v %+v", b, k, s)
		}
	})
}

// FuzzOpen: arbitrary bytes as a sealed message never panic Open, and
// are refused (only the sealer's key makes a valid seal).
func FuzzOpen(f *testing.F) {
	rng := seeded(12)
	g := Group{Job: "job", Round: 1, Receiver: "r", Members: []string{"a", "b"}, Threshold: 2}
	a, _ := NewSecrets(rng)
	b, _ := NewSecrets(rng)
	ks, ss, _ := g.Deal(a, rng)
	valid, _ := g.Seal(0, 1, a.Channel, b.Channel.Public(), ks[1], ss[1])
	f.Add([]byte(valid))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, sealed []byte) {
		_, _, err := g.Open(0, 1, b.Channel, a.Channel.Public(), sealed)
		if err != nil && !errors.Is(err, ErrSealed) && !errors.Is(err, ErrShares) {
			t.Fatalf("an error that is neither ErrSealed nor ErrShares: %v", err)
		}
		if err == nil && !bytes.Equal(sealed, valid) {
			t.Fatalf("a forged seal opened: %x", sealed)
		}
	})
}
