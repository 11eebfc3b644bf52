package secagg

import (
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
)

// One receiver's round, as the messages between it and its group go
// (SecAgg's four exchanges, with the receiver relaying between members,
// who need not be connected):
//
//  1. each member sends the receiver an Advert (its two public keys);
//  2. the receiver closes the roster and sends every member the Roster;
//     each member answers with Dealt, its shares sealed for each other
//     member;
//  3. the receiver closes the dealing and sends each dealer its Relay
//     (the dealers, and their shares for it); each answers with its
//     Masked contribution, masked against the other dealers only (the
//     shares of a member that did not deal went nowhere, so its masks
//     could not be removed);
//  4. the receiver closes the contributions and sends the survivors a
//     Request; each answers once with a Reveal, and the receiver
//     rebuilds the survivors' self seeds and the dropped dealers' keys
//     and takes the sum.
//
// Sender and Receiver keep one side each; they check every message
// against the round's state and refuse what does not fit with an error
// wrapping ErrMessage (the caller counts it and keeps going). Nothing in
// them reads a clock: the caller closes each phase at its deadline.

// ErrMessage marks a message that does not fit the round: from a
// non-member, in the wrong phase, a second one, or malformed.
var ErrMessage = errors.New("secagg: message refused")

// Advert is a member's first message to a receiver: its public keys for
// the round (mask agreement, share channel) and, where members have
// identity keys, its signature of them (AdvertMessage), by which the
// other members know the receiver relays the keys the member gave.
type Advert struct {
	MaskKey, ChannelKey []byte
	Sig                 []byte
}

// Roster is the receiver's group for the round: the members that
// advertised, sorted, with their public keys, the threshold, and the
// members' signatures of their adverts (nil where none signed).
type Roster struct {
	Members               []string
	MaskKeys, ChannelKeys [][]byte
	Threshold             int
	Sigs                  [][]byte
}

// Dealt is a member's shares for the others: Sealed[j] for roster member
// j (empty for itself).
type Dealt struct {
	Sealed []Sealed
}

// Relay is what the receiver forwards to one dealer: the roster indices
// of the members that dealt (ascending), and each one's sealed shares
// for this dealer (Sealed[k] from Dealers[k]; empty for itself).
type Relay struct {
	Dealers []int
	Sealed  []Sealed
}

// Request asks the survivors (dealer indices, positions in
// Relay.Dealers, ascending) for their shares.
type Request struct {
	Survivors []int
}

// Reveal answers a Request: by dealer index, a survivor's self-seed
// share, a dropped dealer's key share.
type Reveal struct {
	Self, Key map[int]Share
}

// Threshold is the threshold for a roster of n: ⌈fraction·n⌉, at least
// ⌊n/2⌋+1 and 2 (Group.Validate). fraction 0 means DefaultFraction.
func Threshold(n int, fraction float64) int {
	if fraction == 0 {
		fraction = DefaultFraction
	}
	return max(2, n/2+1, int(math.Ceil(fraction*float64(n))))
}

// DefaultFraction is the default threshold as a fraction of the roster:
// a round survives a third of its members dropping out.
const DefaultFraction = 2.0 / 3

// Sender is one member's side of one receiver's round.
type Sender struct {
	job      string
	round    uint64
	receiver string
	self     string
	rand     io.Reader
	secrets  *Secrets
	roster   *Roster
	g        Group // the roster
	idx      int   // self in the roster
	mine     [2][]Share
	dealers  Group // the dealers
	didx     int   // self among the dealers
	held     [][2]Share
	revealed bool
}

// NewSender draws a member's secrets for receiver's round and returns
// its Advert.
func NewSender(job string, round uint64, receiver, self string, rand io.Reader) (*Sender, Advert, error) {
	s, err := NewSecrets(rand)
	if err != nil {
		return nil, Advert{}, err
	}
	return &Sender{job: job, round: round, receiver: receiver, self: self, rand: rand, secrets: s, idx: -1, didx: -1},
		Advert{MaskKey: s.Key.Public(), ChannelKey: s.Channel.Public()}, nil
}

// Deal takes the receiver's roster, which must hold this member with the
// keys it advertised and a threshold of at least minThreshold, and
// returns the member's sealed shares.
func (s *Sender) Deal(r Roster, minThreshold int) (Dealt, error) {
	if s.roster != nil {
		return Dealt{}, fmt.Errorf("%w: a second roster", ErrMessage)
	}
	n := len(r.Members)
	if len(r.MaskKeys) != n || len(r.ChannelKeys) != n {
		return Dealt{}, fmt.Errorf("%w: a roster of %d members with %d and %d keys", ErrMessage, n, len(r.MaskKeys), len(r.ChannelKeys))
	}
	g := Group{Job: s.job, Round: s.round, Receiver: s.receiver, Members: r.Members, Threshold: r.Threshold}
	if err := g.Validate(); err != nil {
		return Dealt{}, fmt.Errorf("%w: roster: %w", ErrMessage, err)
	}
	if r.Threshold < minThreshold {
		return Dealt{}, fmt.Errorf("%w: roster threshold %d, this member wants at least %d", ErrMessage, r.Threshold, minThreshold)
	}
	idx, ok := slices.BinarySearch(r.Members, s.self)
	if !ok {
		return Dealt{}, fmt.Errorf("%w: the roster leaves this member out", ErrMessage)
	}
	if !slices.Equal(r.MaskKeys[idx], s.secrets.Key.Public()) || !slices.Equal(r.ChannelKeys[idx], s.secrets.Channel.Public()) {
		return Dealt{}, fmt.Errorf("%w: the roster gives this member keys it did not advertise", ErrMessage)
	}
	keyShares, selfShares, err := g.Deal(s.secrets, s.rand)
	if err != nil {
		return Dealt{}, err
	}
	d := Dealt{Sealed: make([]Sealed, n)}
	for j := range n {
		if j == idx {
			continue
		}
		if d.Sealed[j], err = g.Seal(idx, j, s.secrets.Channel, r.ChannelKeys[j], keyShares[j], selfShares[j]); err != nil {
			return Dealt{}, fmt.Errorf("%w: member %s's channel key: %w", ErrMessage, r.Members[j], err)
		}
	}
	s.roster, s.g, s.idx = &r, g, idx
	s.mine = [2][]Share{keyShares, selfShares}
	return d, nil
}

// Mask takes the receiver's relay, opens the dealers' shares for this
// member, and masks v (its encoded contribution) in place against the
// other dealers.
func (s *Sender) Mask(rel Relay, v []uint32) error {
	if s.roster == nil || s.held != nil {
		return fmt.Errorf("%w: a relay before the roster, or a second one", ErrMessage)
	}
	if len(rel.Sealed) != len(rel.Dealers) {
		return fmt.Errorf("%w: a relay of %d dealers with %d sealed shares", ErrMessage, len(rel.Dealers), len(rel.Sealed))
	}
	members := make([]string, len(rel.Dealers))
	for k, i := range rel.Dealers {
		if i < 0 || i >= len(s.g.Members) || (k > 0 && i <= rel.Dealers[k-1]) {
			return fmt.Errorf("%w: relay dealers %v: want distinct roster indices, ascending", ErrMessage, rel.Dealers)
		}
		members[k] = s.g.Members[i]
	}
	didx := slices.Index(rel.Dealers, s.idx)
	if didx < 0 {
		return fmt.Errorf("%w: the relay leaves this member out of the dealers", ErrMessage)
	}
	dealers := Group{Job: s.job, Round: s.round, Receiver: s.receiver, Members: members, Threshold: s.g.Threshold}
	if err := dealers.Validate(); err != nil {
		return fmt.Errorf("%w: dealers: %w", ErrMessage, err)
	}
	held := make([][2]Share, len(rel.Dealers))
	publics := make([][]byte, len(rel.Dealers))
	for k, i := range rel.Dealers {
		publics[k] = s.roster.MaskKeys[i]
		if i == s.idx {
			held[k] = [2]Share{s.mine[0][i], s.mine[1][i]}
			continue
		}
		key, self, err := s.g.Open(i, s.idx, s.secrets.Channel, s.roster.ChannelKeys[i], rel.Sealed[k])
		if err != nil {
			return fmt.Errorf("%w: %w", ErrMessage, err)
		}
		held[k] = [2]Share{key, self}
	}
	if err := dealers.Mask(v, didx, s.secrets, publics); err != nil {
		return err
	}
	s.dealers, s.didx, s.held = dealers, didx, held
	return nil
}

// Reveal answers the receiver's request for shares, once per round.
func (s *Sender) Reveal(req Request) (Reveal, error) {
	if s.held == nil {
		return Reveal{}, fmt.Errorf("%w: a request before this member masked", ErrMessage)
	}
	if s.revealed {
		return Reveal{}, fmt.Errorf("%w: a second request in one round (two survivor lists could unmask a member)", ErrMessage)
	}
	self, key, err := s.dealers.Reveal(s.didx, s.held, req.Survivors)
	if err != nil {
		return Reveal{}, fmt.Errorf("%w: %w", ErrMessage, err)
	}
	s.revealed = true
	return Reveal{Self: self, Key: key}, nil
}

// Receiver is the receiver's side of its round.
type Receiver struct {
	job      string
	round    uint64
	receiver string
	fraction float64
	dim      int
	phase    int // 0 adverts, 1 dealing, 2 contributions, 3 reveals, 4 done
	adverts  map[string]Advert
	roster   Roster
	g        Group
	dealt    map[int]Dealt
	dealers  Group
	dIdx     []int // dealers' roster indices
	masked   map[int][]uint32
	surv     []int
	reveals  map[int]Reveal
}

// NewReceiver starts receiver's round for contributions of dim values,
// with the threshold a fraction of the roster (Threshold).
func NewReceiver(job string, round uint64, receiver string, dim int, fraction float64) *Receiver {
	return &Receiver{job: job, round: round, receiver: receiver, fraction: fraction, dim: dim, adverts: map[string]Advert{}}
}

// Advert takes a member's advert.
func (r *Receiver) Advert(from string, a Advert) error {
	switch {
	case r.phase != 0:
		return fmt.Errorf("%w: an advert from %s after the roster closed", ErrMessage, from)
	case from == r.receiver:
		return fmt.Errorf("%w: an advert from the receiver itself", ErrMessage)
	case len(a.MaskKey) != 32 || len(a.ChannelKey) != 32:
		return fmt.Errorf("%w: an advert from %s with keys of %d and %d bytes, want 32", ErrMessage, from, len(a.MaskKey), len(a.ChannelKey))
	}
	if _, dup := r.adverts[from]; dup {
		return fmt.Errorf("%w: a second advert from %s", ErrMessage, from)
	}
	r.adverts[from] = a
	return nil
}

// Roster closes the adverts and returns the roster for every member.
func (r *Receiver) Roster() (Roster, error) {
	if r.phase != 0 {
		return Roster{}, fmt.Errorf("%w: the roster is closed", ErrMessage)
	}
	r.phase = 1
	members := make([]string, 0, len(r.adverts))
	for m := range r.adverts {
		members = append(members, m)
	}
	slices.Sort(members)
	ro := Roster{Members: members, Threshold: Threshold(len(members), r.fraction)}
	signed := false
	for _, m := range members {
		ro.MaskKeys = append(ro.MaskKeys, r.adverts[m].MaskKey)
		ro.ChannelKeys = append(ro.ChannelKeys, r.adverts[m].ChannelKey)
		ro.Sigs = append(ro.Sigs, r.adverts[m].Sig)
		signed = signed || len(r.adverts[m].Sig) > 0
	}
	if !signed {
		ro.Sigs = nil
	}
	r.roster = ro
	r.g = Group{Job: r.job, Round: r.round, Receiver: r.receiver, Members: members, Threshold: ro.Threshold}
	if err := r.g.Validate(); err != nil {
		r.phase = 4
		return Roster{}, fmt.Errorf("%w: %w", ErrTooFew, err)
	}
	r.dealt = map[int]Dealt{}
	return ro, nil
}

// member returns from's roster index.
func (r *Receiver) member(from string) (int, error) {
	i, ok := slices.BinarySearch(r.g.Members, from)
	if !ok {
		return 0, fmt.Errorf("%w: %s is not in the round's roster", ErrMessage, from)
	}
	return i, nil
}

// Dealt takes a member's sealed shares.
func (r *Receiver) Dealt(from string, d Dealt) error {
	if r.phase != 1 {
		return fmt.Errorf("%w: shares from %s outside the dealing", ErrMessage, from)
	}
	i, err := r.member(from)
	if err != nil {
		return err
	}
	if _, dup := r.dealt[i]; dup {
		return fmt.Errorf("%w: a second dealing from %s", ErrMessage, from)
	}
	if len(d.Sealed) != len(r.g.Members) || len(d.Sealed[i]) != 0 {
		return fmt.Errorf("%w: %s dealt %d sealed shares for a roster of %d", ErrMessage, from, len(d.Sealed), len(r.g.Members))
	}
	for j, s := range d.Sealed {
		if j != i && len(s) == 0 {
			return fmt.Errorf("%w: %s dealt nothing for %s", ErrMessage, from, r.g.Members[j])
		}
	}
	r.dealt[i] = d
	return nil
}

// Relays closes the dealing and returns each dealer's relay.
func (r *Receiver) Relays() (map[string]Relay, error) {
	if r.phase != 1 {
		return nil, fmt.Errorf("%w: the dealing is closed", ErrMessage)
	}
	r.phase = 2
	r.dIdx = r.dIdx[:0]
	for i := range r.g.Members {
		if _, ok := r.dealt[i]; ok {
			r.dIdx = append(r.dIdx, i)
		}
	}
	members := make([]string, len(r.dIdx))
	for k, i := range r.dIdx {
		members[k] = r.g.Members[i]
	}
	r.dealers = Group{Job: r.job, Round: r.round, Receiver: r.receiver, Members: members, Threshold: r.g.Threshold}
	if err := r.dealers.Validate(); err != nil {
		r.phase = 4
		return nil, fmt.Errorf("%w: %d of %d members dealt: %w", ErrTooFew, len(members), len(r.g.Members), err)
	}
	out := map[string]Relay{}
	for _, j := range r.dIdx {
		rel := Relay{Dealers: slices.Clone(r.dIdx), Sealed: make([]Sealed, len(r.dIdx))}
		for k, i := range r.dIdx {
			rel.Sealed[k] = r.dealt[i].Sealed[j]
		}
		out[r.g.Members[j]] = rel
	}
	r.masked = map[int][]uint32{}
	return out, nil
}

// Masked takes a dealer's masked contribution.
func (r *Receiver) Masked(from string, v []uint32) error {
	if r.phase != 2 {
		return fmt.Errorf("%w: a contribution from %s outside the round's contributions", ErrMessage, from)
	}
	k := slices.Index(r.dealers.Members, from)
	if k < 0 {
		return fmt.Errorf("%w: a contribution from %s, which did not deal", ErrMessage, from)
	}
	if _, dup := r.masked[k]; dup {
		return fmt.Errorf("%w: a second contribution from %s", ErrMessage, from)
	}
	if len(v) != r.dim {
		return fmt.Errorf("%w: a contribution of %d values from %s, want %d", ErrMessage, len(v), from, r.dim)
	}
	r.masked[k] = v
	return nil
}

// Request closes the contributions and returns the request for shares
// and the survivors it goes to. Fewer survivors than the threshold is
// ErrTooFew: the round is skipped.
func (r *Receiver) Request() (Request, []string, error) {
	if r.phase != 2 {
		return Request{}, nil, fmt.Errorf("%w: the contributions are closed", ErrMessage)
	}
	r.phase = 3
	r.surv = r.surv[:0]
	var names []string
	for k, m := range r.dealers.Members {
		if _, ok := r.masked[k]; ok {
			r.surv = append(r.surv, k)
			names = append(names, m)
		}
	}
	if len(r.surv) < r.dealers.Threshold {
		r.phase = 4
		return Request{}, nil, fmt.Errorf("%w: %d of %d dealers sent contributions, threshold %d", ErrTooFew, len(r.surv), len(r.dealers.Members), r.dealers.Threshold)
	}
	r.reveals = map[int]Reveal{}
	return Request{Survivors: slices.Clone(r.surv)}, names, nil
}

// Reveal takes a survivor's shares.
func (r *Receiver) Reveal(from string, v Reveal) error {
	if r.phase != 3 {
		return fmt.Errorf("%w: shares from %s outside the round's reveals", ErrMessage, from)
	}
	k := slices.Index(r.dealers.Members, from)
	if k < 0 || !slices.Contains(r.surv, k) {
		return fmt.Errorf("%w: shares from %s, which is not a survivor", ErrMessage, from)
	}
	if _, dup := r.reveals[k]; dup {
		return fmt.Errorf("%w: a second reveal from %s", ErrMessage, from)
	}
	for i := range r.dealers.Members {
		_, self := v.Self[i]
		_, key := v.Key[i]
		if alive := slices.Contains(r.surv, i); self != alive || key == alive {
			return fmt.Errorf("%w: %s revealed the wrong shares for %s", ErrMessage, from, r.dealers.Members[i])
		}
	}
	if len(v.Self)+len(v.Key) != len(r.dealers.Members) {
		return fmt.Errorf("%w: %s revealed shares for members outside the dealers", ErrMessage, from)
	}
	r.reveals[k] = v
	return nil
}

// Dropped is how many dealers sent no contribution: members whose
// masks the round removes with the survivors' shares of their keys.
func (r *Receiver) Dropped() int { return len(r.dealers.Members) - len(r.surv) }

// Revealed is how many survivors have revealed their shares.
func (r *Receiver) Revealed() int { return len(r.reveals) }

// Sum closes the round: with the shares of at least the threshold of
// survivors it removes the masks and returns the sum of the survivors'
// encoded contributions and their names. Too few reveals is ErrTooFew;
// shares that do not rebuild are ErrShares.
func (r *Receiver) Sum() ([]uint32, []string, error) {
	if r.phase != 3 {
		return nil, nil, fmt.Errorf("%w: the round is not collecting reveals", ErrMessage)
	}
	r.phase = 4
	if len(r.reveals) < r.dealers.Threshold {
		return nil, nil, fmt.Errorf("%w: %d survivors revealed shares, threshold %d", ErrTooFew, len(r.reveals), r.dealers.Threshold)
	}
	selfShares, keyShares := map[int][]Share{}, map[int][]Share{}
	revealers := make([]int, 0, len(r.reveals))
	for k := range r.reveals {
		revealers = append(revealers, k)
	}
	slices.Sort(revealers)
	for _, k := range revealers {
		v := r.reveals[k]
		for i, s := range v.Self {
			selfShares[i] = append(selfShares[i], s)
		}
		for i, s := range v.Key {
			keyShares[i] = append(keyShares[i], s)
		}
	}
	rec, err := r.dealers.Recover(r.surv, selfShares, keyShares)
	if err != nil {
		return nil, nil, err
	}
	sum := make([]uint32, r.dim)
	names := make([]string, len(r.surv))
	for n, k := range r.surv {
		Add(sum, r.masked[k])
		names[n] = r.dealers.Members[k]
	}
	publics := make([][]byte, len(r.dIdx))
	for k, i := range r.dIdx {
		publics[k] = r.roster.MaskKeys[i]
	}
	if err := r.dealers.Unmask(sum, r.surv, rec, publics); err != nil {
		return nil, nil, err
	}
	return sum, names, nil
}
