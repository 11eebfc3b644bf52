package gossip

import (
	"bufio"
	"bytes"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"

	"github.com/gossipd/gossipd/merge"
)

// Graph is a static topology over nodes 0..N-1. Out[i] lists i's
// out-neighbours, sorted; an undirected graph has j ∈ Out[i] ⇔ i ∈ Out[j].
type Graph struct {
	N        int
	Out      [][]int
	Directed bool
}

// CheckTopology reports whether ParseTopology could build spec (not
// an edge list) over n nodes, without building it; n ≤ 0 checks the spec
// alone (a topology over members still to come).
func CheckTopology(spec string, n int) error {
	name, arg, hasArg := strings.Cut(spec, ":")
	switch name {
	case "ring", "torus", "complete", "exponential":
		if hasArg {
			return fmt.Errorf("%w: topology %q: %s takes no argument", ErrConfig, spec, name)
		}
	case "regular":
		k, err := strconv.Atoi(arg)
		if err != nil {
			return fmt.Errorf("%w: topology %q: degree %q", ErrConfig, spec, arg)
		}
		if k < 1 || n > 0 && (k >= n || n*k%2 != 0) {
			return fmt.Errorf("%w: no %d-regular graph on %d nodes", ErrConfig, k, n)
		}
	default:
		return fmt.Errorf("%w: topology %q, want %s", ErrConfig, spec, strings.Join(Topologies, "|"))
	}
	return nil
}

// Topologies lists the topology specs ParseTopology accepts.
var Topologies = []string{"ring", "torus", "regular:K", "exponential", "complete", "edges"}

// ParseTopology builds a graph of n nodes: "ring", "torus" (2-D, the most
// square r×c with r·c = n), "regular:K" (random K-regular, from rng),
// "exponential" (directed, i → i+2^k mod n; SGP's graph), "complete".
// Edge-list files are read by the shell and given to EdgeList.
func ParseTopology(spec string, n int, rng *rand.Rand) (*Graph, error) {
	if n < 2 {
		return nil, fmt.Errorf("%w: topology of %d nodes", ErrConfig, n)
	}
	if err := CheckTopology(spec, n); err != nil {
		return nil, err
	}
	name, arg, _ := strings.Cut(spec, ":")
	switch name {
	case "ring":
		return Ring(n), nil
	case "torus":
		return Torus(n), nil
	case "complete":
		return Complete(n), nil
	case "exponential":
		return Exponential(n), nil
	}
	k, _ := strconv.Atoi(arg) // "regular:K", K checked
	return RandomRegular(n, k, rng)
}

func undirected(n int, edges func(add func(i, j int))) *Graph {
	sets := make([]map[int]bool, n)
	for i := range sets {
		sets[i] = map[int]bool{}
	}
	edges(func(i, j int) {
		if i != j {
			sets[i][j], sets[j][i] = true, true
		}
	})
	g := &Graph{N: n, Out: make([][]int, n)}
	for i, s := range sets {
		for j := range s {
			g.Out[i] = append(g.Out[i], j)
		}
		slices.Sort(g.Out[i])
	}
	return g
}

// Ring connects i with i±1.
func Ring(n int) *Graph {
	return undirected(n, func(add func(i, j int)) {
		for i := 0; i < n; i++ {
			add(i, (i+1)%n)
		}
	})
}

// Torus is an r×c 2-D torus with r the largest divisor of n up to √n.
func Torus(n int) *Graph {
	r := int(math.Sqrt(float64(n)))
	for n%r != 0 {
		r--
	}
	c := n / r
	return undirected(n, func(add func(i, j int)) {
		for i := 0; i < n; i++ {
			row, col := i/c, i%c
			add(i, row*c+(col+1)%c)
			add(i, ((row+1)%r)*c+col)
		}
	})
}

// Complete connects every pair.
func Complete(n int) *Graph {
	return undirected(n, func(add func(i, j int)) {
		for i := 0; i < n; i++ {
			for j := i + 1; j < n; j++ {
				add(i, j)
			}
		}
	})
}

// Exponential is the directed graph i → i+2^k mod n (k = 0..⌊log2(n−1)⌋).
func Exponential(n int) *Graph {
	g := &Graph{N: n, Out: make([][]int, n), Directed: true}
	for i := 0; i < n; i++ {
		for h := 1; h < n; h *= 2 {
			g.Out[i] = append(g.Out[i], (i+h)%n)
		}
		slices.Sort(g.Out[i])
		g.Out[i] = slices.Compact(g.Out[i])
	}
	return g
}

// RandomRegular draws a random k-regular simple graph (configuration model
// with restarts; where that keeps failing, random double-edge swaps from a
// circulant graph).
func RandomRegular(n, k int, rng *rand.Rand) (*Graph, error) {
	if k < 1 || k >= n || n*k%2 != 0 {
		return nil, fmt.Errorf("%w: no %d-regular graph on %d nodes", ErrConfig, k, n)
	}
	for try := 0; try < 1000; try++ {
		stubs := make([]int, 0, n*k)
		for i := 0; i < n; i++ {
			for j := 0; j < k; j++ {
				stubs = append(stubs, i)
			}
		}
		rng.Shuffle(len(stubs), func(i, j int) { stubs[i], stubs[j] = stubs[j], stubs[i] })
		ok := true
		seen := map[[2]int]bool{}
		for p := 0; p < len(stubs); p += 2 {
			a, b := min(stubs[p], stubs[p+1]), max(stubs[p], stubs[p+1])
			if a == b || seen[[2]int{a, b}] {
				ok = false
				break
			}
			seen[[2]int{a, b}] = true
		}
		if ok {
			return undirected(n, func(add func(i, j int)) {
				for p := 0; p < len(stubs); p += 2 {
					add(stubs[p], stubs[p+1])
				}
			}), nil
		}
	}
	// Larger degrees rarely come out of the configuration model simple
	// (a 7-regular graph on 8 nodes never does, an 8-regular one on 200
	// almost never): start from a k-regular circulant graph and shuffle
	// it by random double-edge swaps, which keep every degree.
	return swappedRegular(n, k, rng), nil
}

// swappedRegular is a random k-regular simple graph on n nodes (n·k even,
// k < n): the circulant graph (each node joined to the k/2 nearest on
// either side, and, for odd k, to the opposite node), then 10 double-edge
// swaps per edge, each {a,b},{c,d} → {a,d},{c,b} (or {a,c},{b,d}) unless
// that would make a loop or a double edge.
func swappedRegular(n, k int, rng *rand.Rand) *Graph {
	type edge [2]int
	key := func(a, b int) edge { return edge{min(a, b), max(a, b)} }
	has := map[edge]bool{}
	var edges []edge
	add := func(a, b int) {
		if e := key(a, b); a != b && !has[e] {
			has[e] = true
			edges = append(edges, e)
		}
	}
	for i := 0; i < n; i++ {
		for d := 1; d <= k/2; d++ {
			add(i, (i+d)%n)
		}
		if k%2 == 1 {
			add(i, (i+n/2)%n)
		}
	}
	for range 10 * len(edges) {
		x, y := rng.IntN(len(edges)), rng.IntN(len(edges))
		if x == y {
			continue
		}
		a, b, c, d := edges[x][0], edges[x][1], edges[y][0], edges[y][1]
		if rng.IntN(2) == 0 {
			c, d = d, c
		}
		// {a,b},{c,d} → {a,d},{c,b}
		if a == d || c == b || has[key(a, d)] || has[key(c, b)] {
			continue
		}
		delete(has, edges[x])
		delete(has, edges[y])
		edges[x], edges[y] = key(a, d), key(c, b)
		has[edges[x]], has[edges[y]] = true, true
	}
	return undirected(n, func(add func(i, j int)) {
		for _, e := range edges {
			add(e[0], e[1])
		}
	})
}

// EdgeList reads an undirected graph of n nodes from lines "i j" (0-based;
// '#' starts a comment).
func EdgeList(data []byte, n int) (*Graph, error) {
	var edges [][2]int
	sc := bufio.NewScanner(bytes.NewReader(data))
	line := 0
	for sc.Scan() {
		line++
		t := sc.Text()
		if k := strings.IndexByte(t, '#'); k >= 0 {
			t = t[:k]
		}
		f := strings.Fields(t)
		if len(f) == 0 {
			continue
		}
		if len(f) != 2 {
			return nil, fmt.Errorf("%w: edge list line %d: want \"i j\"", ErrConfig, line)
		}
		i, err1 := strconv.Atoi(f[0])
		j, err2 := strconv.Atoi(f[1])
		if err1 != nil || err2 != nil || i < 0 || j < 0 || i >= n || j >= n || i == j {
			return nil, fmt.Errorf("%w: edge list line %d: %q is not an edge of nodes in [0,%d)", ErrConfig, line, t, n)
		}
		edges = append(edges, [2]int{i, j})
	}
	g := undirected(n, func(add func(i, j int)) {
		for _, e := range edges {
			add(e[0], e[1])
		}
	})
	for i, o := range g.Out {
		if len(o) == 0 {
			return nil, fmt.Errorf("%w: edge list leaves node %d isolated", ErrConfig, i)
		}
	}
	return g, nil
}

// Undirected returns g with every edge made two-way (g itself if it is
// undirected already).
func (g *Graph) Undirected() *Graph {
	if !g.Directed {
		return g
	}
	return undirected(g.N, func(add func(i, j int)) {
		for i, o := range g.Out {
			for _, j := range o {
				add(i, j)
			}
		}
	})
}

// MHWeights returns node i's Metropolis–Hastings mixing weights for the
// undirected version of g: each neighbour's weight and the self-weight
// W_ii = 1 − Σ_j W_ij. The matrix they form is symmetric and doubly
// stochastic.
func (g *Graph) MHWeights(i int, name func(int) PeerID) ([]Neighbor, float64) {
	u := g.Undirected()
	self := 1.0
	out := make([]Neighbor, len(u.Out[i]))
	for k, j := range u.Out[i] {
		w := merge.MetropolisHastings(len(u.Out[i]), len(u.Out[j]))
		out[k] = Neighbor{ID: name(j), Weight: w}
		self -= w
	}
	return out, self
}

// graphProtocols mix over a graph.
var graphProtocols = []string{DPSGD, ADPSGD, PushSum}

// NeedsTopology reports whether protocol mixes over a graph (dpsgd, adpsgd,
// pushsum). SFB talks to every peer; random walk samples its peers.
func NeedsTopology(protocol string) bool {
	return slices.Contains(graphProtocols, protocol)
}

// DefaultTopology is the graph a protocol uses when none is given: SGP's
// time-varying exponential graph for pushsum, a ring otherwise.
func DefaultTopology(protocol string) string {
	if protocol == PushSum {
		return "exponential"
	}
	return "ring"
}

// Assign returns node i's neighbours (for Config.Neighbors) and self-weight
// among n nodes named by name: pushsum's out-neighbours in g (weight 1);
// dpsgd's and adpsgd's Metropolis–Hastings weights on g; sfb's every other
// node (g is not used and may be nil); nothing for random walk. The daemon
// and the simulator both call it, so they build the same topologies.
func Assign(protocol string, g *Graph, n, i int, name func(int) PeerID) ([]Neighbor, float64) {
	var out []Neighbor
	switch {
	case protocol == SFB:
		for j := 0; j < n; j++ {
			if j != i {
				out = append(out, Neighbor{ID: name(j), Weight: 1})
			}
		}
	case protocol == PushSum && g != nil:
		for _, j := range g.Out[i] {
			out = append(out, Neighbor{ID: name(j), Weight: 1})
		}
	case NeedsTopology(protocol) && g != nil:
		return g.MHWeights(i, name)
	}
	return out, 0
}
