package gossip

import (
	"cmp"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestPermuteIsPerm: permute gives rng.Perm's permutation, appended to
// what p holds, and leaves the generator where rng.Perm leaves it, so a
// view's shuffles draw what they drew with rng.Perm.
func TestPermuteIsPerm(t *testing.T) {
	for n := range 70 {
		a, b := rand.New(rand.NewPCG(uint64(n), 1)), rand.New(rand.NewPCG(uint64(n), 1))
		want := a.Perm(n)
		got := permute([]int{-1}, n, b)
		if got[0] != -1 || !slices.Equal(got[1:], want) {
			t.Fatalf("n=%d: permute = %v, want [-1] then %v", n, got, want)
		}
		if x, y := a.Uint64(), b.Uint64(); x != y {
			t.Fatalf("n=%d: the generators parted: next draws %d and %d", n, x, y)
		}
	}
}

// TestViewFind: a view's search finds what a binary search by IDs finds
// (slices.BinarySearchFunc), and where it would insert what it does not
// hold, for IDs short and long, sharing prefixes, and ending in zero
// bytes.
func TestViewFind(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	randID := func() PeerID {
		b := []byte([]string{"p", "12D3KooW", "12D3KooWAbc"}[rng.IntN(3)])
		for range rng.IntN(4) {
			b = append(b, []byte{0, 'a', 'b', 0xff}[rng.IntN(4)])
		}
		return PeerID(b)
	}
	for range 200 {
		v := newView("self", 12)
		for range 40 {
			id := randID()
			want, wantOK := slices.BinarySearchFunc(v.entries, id, func(e Descriptor, id PeerID) int { return cmp.Compare(e.ID, id) })
			if got, gotOK := v.find(id); got != want || gotOK != wantOK {
				t.Fatalf("find(%q) in %q = %d, %v; want %d, %v", id, ids(v.entries), got, gotOK, want, wantOK)
			}
			v.merge([]Descriptor{{ID: id, Age: int64(rng.IntN(5))}}, ids(v.entries[:min(1, len(v.entries))]))
			if !slices.IsSortedFunc(v.entries, func(a, b Descriptor) int { return cmp.Compare(a.ID, b.ID) }) {
				t.Fatalf("view %q is not sorted", ids(v.entries))
			}
		}
	}
}
