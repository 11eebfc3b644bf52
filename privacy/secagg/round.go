package secagg

import (
	"errors"
	"fmt"
	"io"
	"slices"
)

// ErrTooFew is returned for a round with fewer survivors than the
// threshold: its masks cannot be removed, so the round is skipped.
var ErrTooFew = errors.New("secagg: too few survivors to unmask the round")

// Group is one receiver's group of senders in one round: the
// in-neighbours that mask for it, in a fixed order (sorted IDs).
type Group struct {
	Job      string
	Round    uint64
	Receiver string
	Members  []string
	// Threshold is t: how many members' shares rebuild a secret.
	Threshold int
}

// Validate checks the group: distinct sorted members, n/2 < t ≤ n ≤
// MaxShares, t ≥ 2. A group of one would hand its receiver the member's
// contribution. A threshold of half the members or fewer would let a
// receiver that lies about who survived collect t shares of a member's
// key from one half and t of its self seed from the other, and unmask it
// (every member answers one unmasking request per round: Reveal).
func (g Group) Validate() error {
	n := len(g.Members)
	switch {
	case n < 2:
		return fmt.Errorf("secagg: a group of %d members: a receiver would see one contribution alone", n)
	case n > MaxShares:
		return fmt.Errorf("secagg: a group of %d members (at most %d)", n, MaxShares)
	case g.Threshold < 2 || g.Threshold > n || 2*g.Threshold <= n:
		return fmt.Errorf("secagg: threshold %d for %d members (want more than half of them, at least 2: %d…%d)", g.Threshold, n, max(2, n/2+1), n)
	case !slices.IsSorted(g.Members) || len(slices.Compact(slices.Clone(g.Members))) != n:
		return fmt.Errorf("secagg: members must be distinct and sorted")
	}
	return nil
}

// context is the agreement context of members i and j.
func (g Group) context(i, j int) Context {
	return Context{Job: g.Job, Round: g.Round, Receiver: g.Receiver, A: g.Members[i], B: g.Members[j]}
}

// Secrets are what a member draws for one group in one round: its mask
// agreement key pair (shared out, rebuilt if it drops out), its
// self-mask seed (shared out, rebuilt if it survives) and its channel
// key pair (never shared: it seals the shares it sends and opens those
// it receives). A member of several receivers' groups draws Secrets for
// each, every round: reused, a key rebuilt by one receiver would open
// the member's pair masks in another receiver's group, and a self seed
// would repeat its keystream.
type Secrets struct {
	Key     *KeyPair
	Self    Seed
	Channel *KeyPair
}

// NewSecrets draws a member's secrets from rand.
func NewSecrets(rand io.Reader) (*Secrets, error) {
	k, err := NewKeyPair(rand)
	if err != nil {
		return nil, err
	}
	s := &Secrets{Key: k}
	if _, err := io.ReadFull(rand, s.Self[:]); err != nil {
		return nil, fmt.Errorf("secagg: self seed: %w", err)
	}
	if s.Channel, err = NewKeyPair(rand); err != nil {
		return nil, err
	}
	return s, nil
}

// Deal splits a member's secrets into one share of each per member
// (index j goes to member j): keyShares rebuild its private key (used
// only if it drops out), selfShares its self seed (used only if it
// survives). A member that holds both for one sender must never hand
// out both.
func (g Group) Deal(s *Secrets, rand io.Reader) (keyShares, selfShares []Share, err error) {
	if err := g.Validate(); err != nil {
		return nil, nil, err
	}
	n := len(g.Members)
	if keyShares, err = Split(s.Key.Bytes(), n, g.Threshold, rand); err != nil {
		return nil, nil, err
	}
	if selfShares, err = Split(s.Self[:], n, g.Threshold, rand); err != nil {
		return nil, nil, err
	}
	return keyShares, selfShares, nil
}

// Mask masks member self's encoded contribution v in place: its self
// mask, and for every other member j the pair mask agreed with j's
// public key, added if self < j and subtracted if self > j.
func (g Group) Mask(v []uint32, self int, s *Secrets, publics [][]byte) error {
	if len(publics) != len(g.Members) || self < 0 || self >= len(g.Members) {
		return fmt.Errorf("secagg: member %d of %d with %d public keys", self, len(g.Members), len(publics))
	}
	for j := range g.Members {
		if j == self {
			continue
		}
		seed, err := s.Key.Agree(publics[j], g.context(self, j))
		if err != nil {
			return fmt.Errorf("secagg: member %s: %w", g.Members[j], err)
		}
		AddMask(v, seed, pairSign(self, j))
	}
	AddMask(v, s.Self, 1)
	return nil
}

// pairSign is the sign of the pair mask member i adds for member j.
func pairSign(i, j int) int {
	if i < j {
		return 1
	}
	return -1
}

// Recovered is what a receiver rebuilt from the survivors' shares: the
// survivors' self seeds and the dropped members' private keys.
type Recovered struct {
	Self    map[int]Seed
	Dropped map[int]*KeyPair
}

// Recover rebuilds, from the shares the survivors handed in (shares[j]:
// the shares of member j's secret that came back), each survivor's self
// seed and each dropped member's key. Fewer than Threshold survivors is
// ErrTooFew; shares that do not rebuild are ErrShares, naming the member.
func (g Group) Recover(survivors []int, selfShares, keyShares map[int][]Share) (*Recovered, error) {
	alive, err := g.survivorSet(survivors)
	if err != nil {
		return nil, err
	}
	r := &Recovered{Self: map[int]Seed{}, Dropped: map[int]*KeyPair{}}
	for i := range g.Members {
		if alive[i] {
			b, err := Combine(selfShares[i], g.Threshold)
			if err == nil && len(b) != len(Seed{}) {
				err = fmt.Errorf("%w: %d bytes, a seed has %d", ErrShares, len(b), len(Seed{}))
			}
			if err != nil {
				return nil, fmt.Errorf("secagg: member %s's self seed: %w", g.Members[i], err)
			}
			r.Self[i] = Seed(b)
			continue
		}
		b, err := Combine(keyShares[i], g.Threshold)
		if err != nil {
			return nil, fmt.Errorf("secagg: member %s's key: %w", g.Members[i], err)
		}
		k, err := KeyPairFromBytes(b)
		if err != nil {
			return nil, fmt.Errorf("secagg: member %s's key: %w: %w", g.Members[i], ErrShares, err)
		}
		r.Dropped[i] = k
	}
	return r, nil
}

// Unmask removes from sum, the sum of the survivors' masked vectors, the
// survivors' self masks and the masks the dropped members shared with
// them, leaving the sum of the survivors' encoded contributions.
func (g Group) Unmask(sum []uint32, survivors []int, r *Recovered, publics [][]byte) error {
	if len(publics) != len(g.Members) {
		return fmt.Errorf("secagg: %d public keys for %d members", len(publics), len(g.Members))
	}
	alive, err := g.survivorSet(survivors)
	if err != nil {
		return err
	}
	for i := range g.Members {
		_, self := r.Self[i]
		_, key := r.Dropped[i]
		if alive[i] != self || alive[i] == key {
			return fmt.Errorf("secagg: member %s: a %s needs its %s, and only that", g.Members[i], map[bool]string{true: "survivor", false: "dropped member"}[alive[i]], map[bool]string{true: "self seed", false: "key"}[alive[i]])
		}
	}
	for _, i := range survivors {
		seed, ok := r.Self[i]
		if !ok {
			return fmt.Errorf("secagg: no self seed for survivor %s", g.Members[i])
		}
		AddMask(sum, seed, -1)
	}
	dropped := make([]int, 0, len(r.Dropped))
	for j := range r.Dropped {
		dropped = append(dropped, j)
	}
	slices.Sort(dropped)
	for _, j := range dropped {
		for _, i := range survivors {
			seed, err := r.Dropped[j].Agree(publics[i], g.context(j, i))
			if err != nil {
				return fmt.Errorf("secagg: member %s: %w", g.Members[i], err)
			}
			AddMask(sum, seed, -pairSign(i, j))
		}
	}
	return nil
}

// survivorSet checks a survivor list (distinct, sorted, members of the
// group, at least Threshold of them) and returns it as a set.
func (g Group) survivorSet(survivors []int) (map[int]bool, error) {
	if len(survivors) < g.Threshold {
		return nil, fmt.Errorf("%w: %d of %d members, threshold %d", ErrTooFew, len(survivors), len(g.Members), g.Threshold)
	}
	alive := map[int]bool{}
	for k, i := range survivors {
		if i < 0 || i >= len(g.Members) || (k > 0 && i <= survivors[k-1]) {
			return nil, fmt.Errorf("secagg: survivors %v: want distinct members of the group of %d, in order", survivors, len(g.Members))
		}
		alive[i] = true
	}
	return alive, nil
}

// Reveal is what member self hands the receiver to unmask a round, from
// the shares it holds (held[i][0]: its share of member i's key,
// held[i][1]: of i's self seed): for each survivor its self-seed share,
// for each other member its key share, never both for one member. The
// survivor list must be valid, hold at least Threshold members and self.
// A member answers one unmasking request per round: the caller keeps
// that rule (asked twice, with two survivor lists, a member would hand
// out both shares of someone).
func (g Group) Reveal(self int, held [][2]Share, survivors []int) (selfShares, keyShares map[int]Share, err error) {
	if len(held) != len(g.Members) {
		return nil, nil, fmt.Errorf("secagg: %d held shares for %d members", len(held), len(g.Members))
	}
	alive, err := g.survivorSet(survivors)
	if err != nil {
		return nil, nil, err
	}
	if !alive[self] {
		return nil, nil, fmt.Errorf("secagg: member %s is asked to unmask a round it is not a survivor of", g.Members[self])
	}
	selfShares, keyShares = map[int]Share{}, map[int]Share{}
	for i := range g.Members {
		if alive[i] {
			selfShares[i] = held[i][1]
		} else {
			keyShares[i] = held[i][0]
		}
	}
	return selfShares, keyShares, nil
}
