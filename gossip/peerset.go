package gossip

import "slices"

// Sorted sets of peers, and random picks from a list of peers with the
// core's seeded generator (HyParView's views).

// insertSorted adds p to the sorted xs.
func insertSorted(xs []PeerID, p PeerID) []PeerID {
	i, found := slices.BinarySearch(xs, p)
	if found {
		return xs
	}
	return slices.Insert(xs, i, p)
}

// removeSorted takes p out of the sorted xs and reports whether it was there.
func removeSorted(xs []PeerID, p PeerID) ([]PeerID, bool) {
	i, found := slices.BinarySearch(xs, p)
	if !found {
		return xs, false
	}
	return slices.Delete(xs, i, i+1), true
}

// hasSorted reports whether the sorted xs holds p.
func hasSorted(xs []PeerID, p PeerID) bool {
	_, found := slices.BinarySearch(xs, p)
	return found
}

// randomOf returns a random element of xs not in skip.
func (n *Core) randomOf(xs []PeerID, skip ...PeerID) (PeerID, bool) {
	cand := make([]PeerID, 0, len(xs))
	for _, x := range xs {
		if !slices.Contains(skip, x) {
			cand = append(cand, x)
		}
	}
	if len(cand) == 0 {
		return "", false
	}
	return cand[n.rng.IntN(len(cand))], true
}

// sample returns up to k random elements of xs not in skip, in random
// order.
func (n *Core) sample(xs []PeerID, k int, skip ...PeerID) []PeerID {
	cand := make([]PeerID, 0, len(xs))
	for _, x := range xs {
		if !slices.Contains(skip, x) {
			cand = append(cand, x)
		}
	}
	k = min(k, len(cand))
	out := make([]PeerID, 0, k)
	for _, i := range n.rng.Perm(len(cand))[:k] {
		out = append(out, cand[i])
	}
	return out
}
