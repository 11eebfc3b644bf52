package dataset

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
)

// NewRand returns the deterministic generator every function of this package
// draws from: the same seed gives the same numbers on every platform.
func NewRand(seed uint64) *rand.Rand {
	return rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
}

// StratifiedSplit splits ds into train and test, holding out testFraction of
// each class (rounded, at least one example of a class with two or more).
func StratifiedSplit(ds *Dataset, testFraction float64, seed uint64) (train, test *Dataset) {
	rng := NewRand(seed)
	byClass := indicesByClass(ds)
	var tr, te []int
	for _, idx := range byClass {
		rng.Shuffle(len(idx), func(i, j int) { idx[i], idx[j] = idx[j], idx[i] })
		k := int(math.Round(testFraction * float64(len(idx))))
		if k == 0 && len(idx) >= 2 {
			k = 1
		}
		te = append(te, idx[:k]...)
		tr = append(tr, idx[k:]...)
	}
	slices.Sort(tr)
	slices.Sort(te)
	train, test = ds.Subset(tr), ds.Subset(te)
	train.Name, test.Name = ds.Name, ds.Name+"/test"
	return train, test
}

func indicesByClass(ds *Dataset) [][]int {
	by := make([][]int, ds.Classes)
	for i, y := range ds.Y {
		by[y] = append(by[y], i)
	}
	return by
}

// Partitioner splits a dataset's examples among n nodes. It returns, for each
// node, the indices of its examples. Same seed, same partition.
type Partitioner interface {
	Partition(ds *Dataset, n int, seed uint64) ([][]int, error)
	String() string
}

// ParsePartitioner reads a partition spec: "iid", "dirichlet:ALPHA",
// "shards:K" (K label-sorted shards per node), "quantity:ALPHA" (IID labels,
// Dirichlet(ALPHA) sizes) or "sample:K" (K examples drawn with replacement
// per node: more nodes than examples).
func ParsePartitioner(spec string) (Partitioner, error) {
	name, arg, hasArg := strings.Cut(spec, ":")
	num := func() (float64, error) {
		if !hasArg {
			return 0, fmt.Errorf("%w: %q needs a parameter, e.g. %s:0.5", ErrBadPartition, spec, name)
		}
		v, err := strconv.ParseFloat(arg, 64)
		if err != nil || !(v > 0) || math.IsInf(v, 0) {
			return 0, fmt.Errorf("%w: %q: parameter %q must be a positive number", ErrBadPartition, spec, arg)
		}
		return v, nil
	}
	switch name {
	case "iid":
		if hasArg {
			return nil, fmt.Errorf("%w: %q: iid takes no parameter", ErrBadPartition, spec)
		}
		return IID{}, nil
	case "dirichlet":
		a, err := num()
		return Dirichlet{Alpha: a}, err
	case "quantity":
		a, err := num()
		return QuantitySkew{Alpha: a}, err
	case "shards":
		k, err := num()
		if err == nil && k != math.Trunc(k) {
			err = fmt.Errorf("%w: %q: shards per node must be an integer", ErrBadPartition, spec)
		}
		return Shards{PerNode: int(k)}, err
	case "sample":
		k, err := num()
		if err == nil && (k != math.Trunc(k) || k > 1<<20) {
			err = fmt.Errorf("%w: %q: examples per node must be an integer up to %d", ErrBadPartition, spec, 1<<20)
		}
		return Sample{PerNode: int(k)}, err
	}
	return nil, fmt.Errorf("%w: %q, want iid|dirichlet:α|shards:k|quantity:α|sample:k", ErrBadPartition, spec)
}

func checkNodes(ds *Dataset, n int) error {
	if n <= 0 {
		return fmt.Errorf("%w: %d nodes", ErrBadPartition, n)
	}
	if n > ds.N {
		return fmt.Errorf("%w: %d nodes but only %d examples", ErrBadPartition, n, ds.N)
	}
	return nil
}

// IID deals a random permutation of the examples round-robin, so node sizes
// differ by at most one.
type IID struct{}

// Sample gives every node PerNode examples drawn uniformly with
// replacement, independently of the other nodes: IID, and any number of
// nodes, more than the dataset has examples (a node's examples may repeat,
// and nodes share examples). It is how a simulation of 100,000 peers runs
// on a dataset of 60,000.
type Sample struct{ PerNode int }

func (s Sample) String() string { return fmt.Sprintf("sample:%d", s.PerNode) }

// Partition implements Partitioner.
func (s Sample) Partition(ds *Dataset, n int, seed uint64) ([][]int, error) {
	if n <= 0 || s.PerNode <= 0 || ds.N == 0 {
		return nil, fmt.Errorf("%w: %d nodes of %d examples from %d", ErrBadPartition, n, s.PerNode, ds.N)
	}
	rng := NewRand(seed)
	all := make([]int, n*s.PerNode) // one allocation for every node
	for i := range all {
		all[i] = rng.IntN(ds.N)
	}
	parts := make([][]int, n)
	for k := range parts {
		parts[k] = all[k*s.PerNode : (k+1)*s.PerNode : (k+1)*s.PerNode]
		slices.Sort(parts[k])
	}
	return parts, nil
}

func (IID) String() string { return "iid" }

// Partition implements Partitioner.
func (IID) Partition(ds *Dataset, n int, seed uint64) ([][]int, error) {
	if err := checkNodes(ds, n); err != nil {
		return nil, err
	}
	perm := NewRand(seed).Perm(ds.N)
	parts := make([][]int, n)
	for k, i := range perm {
		parts[k%n] = append(parts[k%n], i)
	}
	for _, p := range parts {
		slices.Sort(p)
	}
	return parts, nil
}

// Dirichlet gives each class's examples to the nodes in proportions drawn
// from Dirichlet(Alpha): small Alpha, strong label skew (Hsu et al. 2019).
// Nodes left empty receive one example from the largest node.
type Dirichlet struct{ Alpha float64 }

func (d Dirichlet) String() string { return "dirichlet:" + strconv.FormatFloat(d.Alpha, 'g', -1, 64) }

// Partition implements Partitioner.
func (d Dirichlet) Partition(ds *Dataset, n int, seed uint64) ([][]int, error) {
	if err := checkNodes(ds, n); err != nil {
		return nil, err
	}
	rng := NewRand(seed)
	parts := make([][]int, n)
	for _, idx := range indicesByClass(ds) {
		rng.Shuffle(len(idx), func(i, j int) { idx[i], idx[j] = idx[j], idx[i] })
		p := sampleDirichlet(rng, d.Alpha, n)
		cuts := proportionalCuts(p, len(idx))
		for k := range n {
			parts[k] = append(parts[k], idx[cuts[k]:cuts[k+1]]...)
		}
	}
	fillEmpty(parts)
	for _, p := range parts {
		slices.Sort(p)
	}
	return parts, nil
}

// Shards sorts the examples by label, cuts them into n·PerNode equal shards
// and gives each node PerNode random shards (McMahan et al. 2017).
type Shards struct{ PerNode int }

func (s Shards) String() string { return "shards:" + strconv.Itoa(s.PerNode) }

// Partition implements Partitioner.
func (s Shards) Partition(ds *Dataset, n int, seed uint64) ([][]int, error) {
	if err := checkNodes(ds, n); err != nil {
		return nil, err
	}
	total := n * s.PerNode
	if s.PerNode <= 0 || total > ds.N {
		return nil, fmt.Errorf("%w: %d shards per node × %d nodes for %d examples", ErrBadPartition, s.PerNode, n, ds.N)
	}
	rng := NewRand(seed)
	order := make([]int, ds.N)
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return int(ds.Y[a]) - int(ds.Y[b]) })
	shardOrder := rng.Perm(total)
	parts := make([][]int, n)
	for k, sh := range shardOrder {
		lo, hi := sh*ds.N/total, (sh+1)*ds.N/total
		parts[k/s.PerNode] = append(parts[k/s.PerNode], order[lo:hi]...)
	}
	for _, p := range parts {
		slices.Sort(p)
	}
	return parts, nil
}

// QuantitySkew gives nodes IID examples in amounts proportional to a
// Dirichlet(Alpha) draw; every node gets at least one.
type QuantitySkew struct{ Alpha float64 }

func (q QuantitySkew) String() string { return "quantity:" + strconv.FormatFloat(q.Alpha, 'g', -1, 64) }

// Partition implements Partitioner.
func (q QuantitySkew) Partition(ds *Dataset, n int, seed uint64) ([][]int, error) {
	if err := checkNodes(ds, n); err != nil {
		return nil, err
	}
	rng := NewRand(seed)
	perm := rng.Perm(ds.N)
	cuts := proportionalCuts(sampleDirichlet(rng, q.Alpha, n), ds.N)
	parts := make([][]int, n)
	for k := range n {
		parts[k] = slices.Clone(perm[cuts[k]:cuts[k+1]])
	}
	fillEmpty(parts)
	for _, p := range parts {
		slices.Sort(p)
	}
	return parts, nil
}

// proportionalCuts turns proportions p (summing to 1) into n+1 cut points
// over m items.
func proportionalCuts(p []float64, m int) []int {
	cuts := make([]int, len(p)+1)
	acc := 0.0
	for k := range p {
		acc += p[k]
		cuts[k+1] = min(m, int(math.Round(acc*float64(m))))
	}
	cuts[len(p)] = m
	return cuts
}

// fillEmpty moves one example from the largest part to each empty part.
func fillEmpty(parts [][]int) {
	for k := range parts {
		if len(parts[k]) > 0 {
			continue
		}
		big := 0
		for j := range parts {
			if len(parts[j]) > len(parts[big]) {
				big = j
			}
		}
		last := len(parts[big]) - 1
		parts[k] = append(parts[k], parts[big][last])
		parts[big] = parts[big][:last]
	}
}

// sampleDirichlet draws from a symmetric Dirichlet(alpha) of dimension n.
func sampleDirichlet(rng *rand.Rand, alpha float64, n int) []float64 {
	p := make([]float64, n)
	sum := 0.0
	for i := range p {
		p[i] = sampleGamma(rng, alpha)
		sum += p[i]
	}
	if sum == 0 {
		p[rng.IntN(n)] = 1
		return p
	}
	for i := range p {
		p[i] /= sum
	}
	return p
}

// sampleGamma draws from Gamma(alpha, 1) (Marsaglia & Tsang 2000, with the
// alpha < 1 boost).
func sampleGamma(rng *rand.Rand, alpha float64) float64 {
	if alpha < 1 {
		u := rng.Float64()
		return sampleGamma(rng, alpha+1) * math.Pow(u, 1/alpha)
	}
	d := alpha - 1.0/3
	c := 1 / math.Sqrt(9*d)
	for {
		x := rng.NormFloat64()
		v := 1 + c*x
		if v <= 0 {
			continue
		}
		v = v * v * v
		u := rng.Float64()
		if u < 1-0.0331*x*x*x*x || math.Log(u) < 0.5*x*x+d*(1-v+math.Log(v)) {
			return d * v
		}
	}
}
