package secagg

import (
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"
)

// sessionRound runs one receiver's round over n members through the
// four exchanges; a member listed in silent[phase] sends nothing from
// that phase on (0 adverts, 1 dealing, 2 contribution, 3 reveal). It
// returns the decoded sum, the survivors and the plain sum of the
// survivors' weighted contributions.
func sessionRound(t *testing.T, n, dim int, silent map[int][]int, seed uint64) (got []float32, survivors []string, want []float64, err error) {
	t.Helper()
	src := seeded(seed)
	data := rand.New(rand.NewPCG(seed, 9))
	ring := Ring{}.WithDefaults()
	quiet := func(phase int, m string) bool {
		for p := 0; p <= phase; p++ {
			for _, i := range silent[p] {
				if fmt.Sprintf("m%02d", i) == m {
					return true
				}
			}
		}
		return false
	}
	rx := NewReceiver("job", 7, "recv", dim, 0)
	senders := map[string]*Sender{}
	contrib := map[string][]float32{}
	weight := map[string]float64{}
	for i := range n {
		m := fmt.Sprintf("m%02d", i)
		s, ad, err := NewSender("job", 7, "recv", m, src)
		if err != nil {
			t.Fatal(err)
		}
		senders[m] = s
		x := make([]float32, dim)
		for k := range x {
			x[k] = float32(data.NormFloat64())
		}
		contrib[m], weight[m] = x, 0.1+0.1*float64(i%3)
		if !quiet(0, m) {
			if err := rx.Advert(m, ad); err != nil {
				t.Fatal(err)
			}
		}
	}
	ro, err := rx.Roster()
	if err != nil {
		return nil, nil, nil, err
	}
	for _, m := range ro.Members {
		if quiet(1, m) {
			continue
		}
		d, err := senders[m].Deal(ro, Threshold(len(ro.Members), 0))
		if err != nil {
			t.Fatal(err)
		}
		if err := rx.Dealt(m, d); err != nil {
			t.Fatal(err)
		}
	}
	relays, err := rx.Relays()
	if err != nil {
		return nil, nil, nil, err
	}
	for _, m := range slices.Sorted(maps.Keys(relays)) {
		if quiet(2, m) {
			continue
		}
		v := make([]uint32, dim)
		ring.Encode(v, contrib[m], weight[m])
		if err := senders[m].Mask(relays[m], v); err != nil {
			t.Fatal(err)
		}
		if err := rx.Masked(m, v); err != nil {
			t.Fatal(err)
		}
	}
	req, to, err := rx.Request()
	if err != nil {
		return nil, nil, nil, err
	}
	for _, m := range to {
		if quiet(3, m) {
			continue
		}
		rv, err := senders[m].Reveal(req)
		if err != nil {
			t.Fatal(err)
		}
		if err := rx.Reveal(m, rv); err != nil {
			t.Fatal(err)
		}
	}
	sum, names, err := rx.Sum()
	if err != nil {
		return nil, nil, nil, err
	}
	got = make([]float32, dim)
	ring.Decode(got, sum)
	want = make([]float64, dim)
	for _, m := range names {
		for k, v := range contrib[m] {
			want[k] += weight[m] * float64(v)
		}
	}
	return got, names, want, nil
}

// TestSessionExactSum: the four exchanges give the receiver the sum of
// the survivors' weighted contributions, within the quantisation error
// (k terms: k/(2·scale) per value), with nobody dropping out, with
// members silent from each phase on, and up to the threshold's limit;
// below it the round is skipped with ErrTooFew, never a wrong sum.
func TestSessionExactSum(t *testing.T) {
	const n, dim = 7, 300 // threshold ⌈2/3·7⌉ = 5
	for name, c := range map[string]struct {
		silent    map[int][]int
		survivors int
		tooFew    bool
	}{
		"none":                       {nil, 7, false},
		"one never advertises":       {map[int][]int{0: {3}}, 6, false},
		"one never deals":            {map[int][]int{1: {0}}, 6, false},
		"one drops after dealing":    {map[int][]int{2: {6}}, 6, false},
		"two drop after dealing":     {map[int][]int{2: {1, 4}}, 5, false},
		"one of each":                {map[int][]int{0: {2}, 1: {5}, 2: {0}}, 4, false}, // roster 6 (t 4), dealers 5, survivors 4
		"one survivor never reveals": {map[int][]int{3: {2}}, 7, false},
		"three drop after dealing":   {map[int][]int{2: {0, 1, 2}}, 0, true},
		"too few reveal":             {map[int][]int{3: {0, 1, 2}}, 0, true},
	} {
		t.Run(name, func(t *testing.T) {
			got, names, want, err := sessionRound(t, n, dim, c.silent, 11)
			if c.tooFew {
				if !errors.Is(err, ErrTooFew) {
					t.Fatalf("err %v, want ErrTooFew", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(names) != c.survivors {
				t.Fatalf("%d survivors %v, want %d", len(names), names, c.survivors)
			}
			tol := float64(len(names)) / (2 * DefaultScale)
			for k := range got {
				if d := float64(got[k]) - want[k]; d > tol+1e-6 || d < -tol-1e-6 {
					t.Fatalf("value %d: %v, want %v (±%g)", k, got[k], want[k], tol)
				}
			}
		})
	}
}

// TestSessionRefusals: messages that do not fit the round are refused
// with ErrMessage, and a member answers one request per round.
func TestSessionRefusals(t *testing.T) {
	src := seeded(3)
	rx := NewReceiver("job", 1, "recv", 4, 0)
	var senders []*Sender
	for i := range 3 {
		s, ad, err := NewSender("job", 1, "recv", fmt.Sprintf("m%d", i), src)
		if err != nil {
			t.Fatal(err)
		}
		senders = append(senders, s)
		if err := rx.Advert(fmt.Sprintf("m%d", i), ad); err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			if err := rx.Advert("m0", ad); !errors.Is(err, ErrMessage) {
				t.Errorf("a second advert: %v", err)
			}
			if err := rx.Advert("x", Advert{MaskKey: []byte{1}, ChannelKey: ad.ChannelKey}); !errors.Is(err, ErrMessage) {
				t.Errorf("a short key: %v", err)
			}
		}
	}
	if err := rx.Advert("recv", Advert{}); !errors.Is(err, ErrMessage) {
		t.Errorf("an advert from the receiver: %v", err)
	}
	ro, err := rx.Roster()
	if err != nil {
		t.Fatal(err)
	}
	if err := rx.Advert("late", Advert{}); !errors.Is(err, ErrMessage) {
		t.Errorf("a late advert: %v", err)
	}
	// A roster that swaps a member's keys, leaves it out, or lowers the
	// threshold is refused by the member.
	bad := ro
	bad.MaskKeys = slices.Clone(ro.MaskKeys)
	bad.MaskKeys[0], bad.MaskKeys[1] = bad.MaskKeys[1], bad.MaskKeys[0]
	if _, err := senders[0].Deal(bad, 2); !errors.Is(err, ErrMessage) {
		t.Errorf("swapped keys: %v", err)
	}
	low := ro
	low.Threshold = 1
	if _, err := senders[0].Deal(low, 2); !errors.Is(err, ErrMessage) {
		t.Errorf("threshold 1: %v", err)
	}
	if _, err := senders[0].Deal(ro, 3); !errors.Is(err, ErrMessage) {
		t.Errorf("a threshold below the member's minimum: %v", err)
	}
	var dealt []Dealt
	for _, s := range senders {
		d, err := s.Deal(ro, 2)
		if err != nil {
			t.Fatal(err)
		}
		dealt = append(dealt, d)
	}
	if _, err := senders[0].Deal(ro, 2); !errors.Is(err, ErrMessage) {
		t.Errorf("a second roster: %v", err)
	}
	if err := rx.Dealt("stranger", dealt[0]); !errors.Is(err, ErrMessage) {
		t.Errorf("shares from a non-member: %v", err)
	}
	if err := rx.Dealt("m1", Dealt{Sealed: dealt[1].Sealed[:2]}); !errors.Is(err, ErrMessage) {
		t.Errorf("too few sealed shares: %v", err)
	}
	for i, d := range dealt {
		if err := rx.Dealt(fmt.Sprintf("m%d", i), d); err != nil {
			t.Fatal(err)
		}
	}
	relays, err := rx.Relays()
	if err != nil {
		t.Fatal(err)
	}
	// Shares sealed for another member do not open.
	wrong := relays["m0"]
	wrong.Sealed = slices.Clone(wrong.Sealed)
	wrong.Sealed[1] = relays["m2"].Sealed[1]
	if err := senders[0].Mask(wrong, make([]uint32, 4)); !errors.Is(err, ErrSealed) {
		t.Errorf("shares sealed for another member: %v", err)
	}
	for i, s := range senders {
		m := fmt.Sprintf("m%d", i)
		v := make([]uint32, 4)
		if err := s.Mask(relays[m], v); err != nil {
			t.Fatal(err)
		}
		if err := rx.Masked(m, v[:3]); !errors.Is(err, ErrMessage) {
			t.Errorf("a short contribution: %v", err)
		}
		if err := rx.Masked(m, v); err != nil {
			t.Fatal(err)
		}
	}
	req, to, err := rx.Request()
	if err != nil {
		t.Fatal(err)
	}
	if len(to) != 3 {
		t.Fatalf("request to %v", to)
	}
	rv, err := senders[0].Reveal(req)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := senders[0].Reveal(Request{Survivors: []int{0, 1}}); !errors.Is(err, ErrMessage) {
		t.Errorf("a second request: %v", err)
	}
	if err := rx.Reveal("m1", rv); err != nil {
		t.Fatal(err) // a reveal's shares are checked by Combine, not by who sent them
	}
	if err := rx.Reveal("m1", rv); !errors.Is(err, ErrMessage) {
		t.Errorf("a second reveal: %v", err)
	}
	short := Reveal{Self: map[int]Share{0: rv.Self[0], 1: rv.Self[1]}}
	if err := rx.Reveal("m2", short); !errors.Is(err, ErrMessage) {
		t.Errorf("a reveal missing a share: %v", err)
	}
	both := Reveal{Self: rv.Self, Key: map[int]Share{0: rv.Self[0]}}
	if err := rx.Reveal("m2", both); !errors.Is(err, ErrMessage) {
		t.Errorf("a reveal with both shares of a member: %v", err)
	}
}
