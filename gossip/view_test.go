package gossip

import (
	"cmp"
	"fmt"
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
		b := []byte([]string{"p", "12D3KooW", "12D3KooWAbc", "self"}[rng.IntN(4)])
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
			v.merge([]Descriptor{{ID: id, Age: int64(rng.IntN(5))}}, keyedOf(ids(v.entries[:min(1, len(v.entries))])))
			if !slices.IsSortedFunc(v.entries, func(a, b Descriptor) int { return cmp.Compare(a.ID, b.ID) }) {
				t.Fatalf("view %q is not sorted", ids(v.entries))
			}
			if slices.Contains(ids(v.entries), v.self) {
				t.Fatalf("view %q holds its own node", ids(v.entries))
			}
			for i, e := range v.entries {
				if len(v.keys) != len(v.entries) || v.keys[i] != idKey(e.ID) {
					t.Fatalf("view %q: keys %x are not its entries'", ids(v.entries), v.keys)
				}
			}
		}
	}
}

// TestViewMerge: merge gives what its plain statement does (mergeByDelete:
// each entry dropped, kept younger, added, or put in place of the first
// of the sent entries still in the view, deleted and the entry inserted
// where it sorts), on random full and part-full views, with entries new,
// known, sent, this node's own, empty and of negative age.
func TestViewMerge(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	id := func() PeerID { return PeerID(rune('a' + rng.IntN(30))) }
	for trial := range 3000 {
		size := 1 + rng.IntN(8)
		v := newView("self", size)
		for range rng.IntN(size + 1) {
			v.merge([]Descriptor{{ID: id(), Age: int64(rng.IntN(5))}}, nil)
		}
		var in []Descriptor
		for range rng.IntN(8) {
			d := Descriptor{ID: id(), Age: int64(rng.IntN(6)) - 1}
			switch rng.IntN(10) {
			case 0:
				d.ID = "self"
			case 1:
				d.ID = ""
			}
			in = append(in, d)
		}
		var sent []PeerID
		for range rng.IntN(5) {
			if len(v.entries) > 0 && rng.IntN(3) > 0 {
				sent = append(sent, v.entries[rng.IntN(len(v.entries))].ID)
			} else {
				sent = append(sent, id())
			}
		}
		want := &view{self: v.self, size: v.size, entries: slices.Clone(v.entries)}
		mergeByDelete(want, in, keyedOf(sent))
		v.merge(in, keyedOf(sent))
		if !slices.Equal(v.entries, want.entries) {
			t.Fatalf("trial %d: merge of %v (sent %v) gave %v, want %v", trial, in, sent, v.entries, want.entries)
		}
	}
}

// mergeByDelete is view.merge as it reads in plain words: a replaced
// entry deleted, the new one inserted where it sorts.
func mergeByDelete(v *view, entries []Descriptor, sent []keyed) {
	for _, d := range entries {
		if d.ID == v.self || d.ID == "" || d.Age < 0 {
			continue
		}
		i, ok := findByID(v.entries, d.ID)
		if ok {
			v.entries[i].Age = min(v.entries[i].Age, d.Age)
			continue
		}
		if len(v.entries) >= v.size {
			replaced := false
			for len(sent) > 0 && !replaced {
				s := sent[0]
				sent = sent[1:]
				if j, ok := findByID(v.entries, s.id); ok {
					v.entries = slices.Delete(v.entries, j, j+1)
					replaced = true
				}
			}
			if !replaced {
				continue
			}
			i, _ = findByID(v.entries, d.ID)
		}
		v.entries = slices.Insert(v.entries, i, d)
	}
}

// keyedOf gives each of ps its key, as a shuffle keeps what it sent.
func keyedOf(ps []PeerID) []keyed {
	out := make([]keyed, len(ps))
	for i, p := range ps {
		out[i] = keyed{p, idKey(p)}
	}
	return out
}

// findByID is a binary search of the entries by ID alone.
func findByID(es []Descriptor, id PeerID) (int, bool) {
	return slices.BinarySearchFunc(es, id, func(e Descriptor, id PeerID) int { return cmp.Compare(e.ID, id) })
}

// BenchmarkViewMerge: a Cyclon shuffle's merge into a full view of the
// default size (DefaultViewSize entries, shuffleLen in, as many sent),
// merge against mergeByDelete in the same run:
//
//	go test ./gossip -run '^$' -bench ViewMerge
func BenchmarkViewMerge(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 2))
	name := func() PeerID { return peerName(rng.IntN(10000)) }
	type shuffle struct {
		view []Descriptor
		in   []Descriptor
		sent []keyed
	}
	shuffles := make([]shuffle, 256)
	for i := range shuffles {
		v := newView("self", DefaultViewSize)
		for len(v.entries) < v.size {
			v.merge([]Descriptor{{ID: name(), Age: int64(rng.IntN(5))}}, nil)
		}
		sh := shuffle{view: slices.Clone(v.entries)}
		for range v.shuffleLen() {
			sh.in = append(sh.in, Descriptor{ID: name(), Age: int64(rng.IntN(5))})
			id := v.entries[rng.IntN(len(v.entries))].ID
			sh.sent = append(sh.sent, keyed{id, idKey(id)})
		}
		shuffles[i] = sh
	}
	for _, c := range []struct {
		name  string
		merge func(*view, []Descriptor, []keyed)
	}{{"merge", (*view).merge}, {"byDelete", mergeByDelete}} {
		b.Run(c.name, func(b *testing.B) {
			v := newView("self", DefaultViewSize)
			i := 0
			for b.Loop() {
				sh := &shuffles[i%len(shuffles)]
				v.entries = append(v.entries[:0], sh.view...)
				v.keys = v.keys[:0]
				for _, e := range sh.view {
					v.keys = append(v.keys, idKey(e.ID))
				}
				c.merge(v, sh.in, sh.sent)
				i++
			}
		})
	}
}

func peerName(i int) PeerID { return PeerID(fmt.Sprintf("p%05d", i)) }
