// Package secagg is secure aggregation for neighbourhood averaging: a
// receiver learns the weighted sum of what its in-neighbours send it,
// never one of them. It holds the arithmetic and the cryptography, as
// pure functions with the randomness injected (crypto/rand in the
// daemon, a seeded source in tests and the simulator):
//
//   - the ring (ring.go): each contribution, clipped, is encoded in
//     fixed point as integers modulo 2³², where sums wrap and masks are
//     uniform;
//   - masks (mask.go): AES-256-CTR keystreams, added to a contribution
//     or taken off a sum;
//   - key agreement (keys.go): X25519 between two co-senders of one
//     receiver, the shared secret expanded by HKDF-SHA-256 bound to the
//     job, round, receiver and pair, so a key never serves twice;
//   - Shamir's t-of-n secret sharing over GF(2⁸) (shamir.go), which lets
//     the survivors of a round remove a dropped sender's masks;
//   - the round itself (round.go): SecAgg's double masking (Bonawitz et
//     al., CCS 2017) within a receiver's group of in-neighbours.
//
// A sender i of group G adds to its encoded contribution a self mask
// PRG(bᵢ) and, for every other member j, +PRG(sᵢⱼ) if i < j and −PRG(sᵢⱼ)
// if i > j, sᵢⱼ = sⱼᵢ agreed by the two. In the sum over the senders the
// pairwise masks cancel; the receiver then removes the survivors' self
// masks (bᵢ rebuilt from t shares) and, for a member that dropped out
// after the others masked against it, the masks it shared with each
// survivor (its key rebuilt from t shares). No receiver is given both
// bᵢ and i's key, so it sees one contribution only as uniform noise:
// every member answers one unmasking request per round with one share
// per member (Reveal), and the threshold is more than half the group
// (Validate), so no two disjoint sets of t members exist to be told
// different stories. Secrets are drawn afresh for every group and round.
//
// Threat model of this package: an honest-but-curious receiver learns
// only the sum of the survivors' contributions; it and up to t−1
// colluding members of the group learn nothing more of an honest
// member's contribution (fewer than t shares say nothing). A malicious
// sender can send any contribution within the ring's clipping bound
// (the masks hide it, so robust rules cannot inspect it) or spoil a
// round with bad shares, which Combine detects when more than t shares
// come back; it cannot learn others' contributions.
package secagg
