package trainer

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/gossipd/gossipd/gossip/compress"
	"github.com/gossipd/gossipd/merge"
	"github.com/gossipd/gossipd/model"
	"github.com/gossipd/gossipd/model/compute"
	"github.com/gossipd/gossipd/model/compute/backendtest"
)

// TestMixOnDevice: Mix on a device gives the host's bits and sums, once
// fetched, for weighted sums with and without a gradient term, for
// blends, for trimmed means and medians with and without one, and for
// clipped gossip, Krum and multi-Krum, and vectors sent as int8 and
// fp16, a rand-k step and a top-k step with its index bytes
// (InterpolateRows, TrimmedRows, PairDistanceRows, AverageRows,
// ClipRows, QuantizeRows, MaskRows and TopKRows beside CombineRows; a
// median of more than compute.MaxTrimmedInputs on the host), over two
// generations (the second mixing the first's results,
// which only the device holds): with room for all, and with an arena so
// small that most mixes run on the host, after copying back the stale
// terms they read. A result is stale until fetched, and KnownSum gives
// its Σx²; on the CPU nothing is stale.
func TestMixOnDevice(t *testing.T) {
	spec := model.Spec{Kind: model.MLP, Inputs: 12, Hidden: []int{8}, Classes: 4}
	rng := rand.New(rand.NewPCG(3, 4))
	vec := func(n int) []float32 {
		v := make([]float32, n)
		for i := range v {
			v[i] = float32(rng.NormFloat64())
		}
		return v
	}
	st, err := model.NewStack(spec, 4)
	if err != nil {
		t.Fatal(err)
	}
	P := st.NumParams()
	st.Close()
	var base, grads [][]float32
	const k = 16 // mixes a generation
	for range k {
		base, grads = append(base, vec(P)), append(grads, vec(P))
		base[len(base)-1][1] = float32(math.Copysign(0, -1)) // a copy keeps it, a sum makes it +0
	}
	const onHost = 1 // of both: the median of too many
	w, _ := merge.Normalized(nil, []float64{0.5, 0.25, 0.25})
	// Two generations of k mixes: the second mixes the first's results.
	run := func(onDev bool, slots int) ([][]float32, []float64, ResidentStats, []int32) {
		tops := make([]int32, 0, 2) // pointers into it are kept: no growing
		var opts []model.Option
		if onDev {
			opts = append(opts, model.WithBackend(backendtest.NewDevice()))
		}
		st, err := model.NewStack(spec, 4, opts...)
		if err != nil {
			t.Fatal(err)
		}
		ws := NewBatchWorkspace(st)
		defer ws.Close()
		if slots > 0 {
			ws.res.max = slots
		}
		var out [][]float32
		var sums []float64
		for gen := range 2 {
			src := base
			if gen == 1 {
				src = out[len(out)-k:]
			}
			items := make([]MixItem, k)
			for i := range items {
				switch i {
				case 1: // AD-PSGD's pairwise average
					items[i] = MixItem{Dst: make([]float32, P), Xs: [][]float32{src[i], src[(i+1)%k]}, W: []float32{0.3}, Blend: true}
				case 2: // no gradient term (push-sum's share)
					items[i] = MixItem{Dst: make([]float32, P), Xs: [][]float32{src[i], base[4]}, W: []float32{0.5, 0.25}}
				case 4: // D-PSGD's trimmed mean, with no gradient term
					items[i] = MixItem{Dst: make([]float32, P), Xs: [][]float32{src[i], src[(i+1)%k], base[4], src[(i+3)%k]}, Agg: merge.TrimmedMean{Trim: 1}}
				case 5: // D-PSGD's median and step: over too many for a device in the first generation
					xs := [][]float32{src[i], src[(i+2)%k], base[4], src[(i+4)%k]}
					if gen == 0 {
						for len(xs) <= compute.MaxTrimmedInputs {
							xs = append(xs, base[len(xs)%len(base)])
						}
					}
					items[i] = MixItem{Dst: make([]float32, P), Xs: xs, Agg: merge.Median{}, G: grads[i], A: -0.1}
				case 6: // clipped gossip's, τ the median distance, then τ 4 (most distances are near 17)
					items[i] = MixItem{Dst: make([]float32, P), Xs: [][]float32{src[i], src[(i+1)%k], base[4], src[(i+5)%k]}, Agg: merge.ClippedGossip{Tau: 4 * float64(gen)}, Ws: []float64{0.5, 0.25, 0.25, 0.125}, G: grads[i], A: -0.1}
				case 7: // Krum's pick and step, then its pick alone
					items[i] = MixItem{Dst: make([]float32, P), Xs: [][]float32{src[i], src[(i+1)%k], base[4], src[(i+4)%k], src[(i+6)%k]}, Agg: merge.Krum{F: 1}}
					if gen == 0 {
						items[i].G, items[i].A = grads[i], -0.1
					}
				case 8: // multi-Krum's mean, with no step
					items[i] = MixItem{Dst: make([]float32, P), Xs: [][]float32{src[i], src[(i+2)%k], base[4], src[(i+5)%k]}, Agg: merge.Krum{F: 1, Multi: true}}
				case 9: // a vector sent as int8, as its receiver holds it
					items[i] = MixItem{Dst: make([]float32, P), Xs: [][]float32{src[(i+3)%k]}, Quantize: compress.Int8}
				case 10: // and as fp16
					items[i] = MixItem{Dst: make([]float32, P), Xs: [][]float32{src[(i+5)%k]}, Quantize: compress.FP16}
				case 11: // push-sum's clipped gossip: two pulls, τ the window's median distance, then τ 4
					items[i] = MixItem{Dst: make([]float32, P), Xs: [][]float32{src[i], src[(i+1)%k], src[(i+2)%k], base[4], src[(i+6)%k], src[(i+7)%k]}, Agg: merge.ClippedWindow{Tau: 4 * float64(gen), Pulls: 2}, Ws: []float64{1, 0.5, 0.25, 0, 0, 0}}
				case 12: // and its own: nothing to pull, then a window at distance 0
					items[i] = MixItem{Dst: make([]float32, P), Xs: [][]float32{src[i], src[(i+3)%k], src[i]}, Agg: merge.ClippedWindow{Pulls: gen}, Ws: []float64{1, 0.5, 0}}
				case 14: // CHOCO's rand-k step, a tenth of the values kept
					keep := compress.RandIndices(nil, P, compress.Spec{Kind: compress.RandK, Fraction: 0.1}.Keep(P), uint64(gen+1))
					items[i] = MixItem{Dst: make([]float32, P), Xs: [][]float32{src[(i+2)%k]}, Mask: true, Keep: keep}
				case 15: // CHOCO's top-k step, a tenth of the values kept, with its index bytes
					tops = append(tops, -1)
					items[i] = MixItem{Dst: make([]float32, P), Xs: [][]float32{src[(i+3)%k]}, Top: compress.Spec{Kind: compress.TopK, Fraction: 0.1}.Keep(P), IndexBytes: &tops[len(tops)-1]}
				case 13: // and its own again: no window to set τ
					items[i] = MixItem{Dst: make([]float32, P), Xs: [][]float32{src[i], src[(i+3)%k], src[(i+4)%k]}, Agg: merge.ClippedWindow{Pulls: 2}, Ws: []float64{1, 0.5, 0.5}}
				default:
					items[i] = MixItem{Dst: make([]float32, P), Xs: [][]float32{src[i], src[(i+1)%k], base[4]}, W: w, G: grads[i], A: -0.1}
				}
			}
			s := make([]float64, k)
			ws.Mix(items, s)
			for i, it := range items {
				if onDev && slots == 0 && len(it.Xs) <= compute.MaxTrimmedInputs {
					if !ws.Stale(it.Dst) {
						t.Fatalf("generation %d, mix %d: not left on the device", gen, i)
					}
					if ss, ok := ws.KnownSum(it.Dst); !ok || ss != s[i] {
						t.Fatalf("KnownSum = %v, %v; Mix said %v", ss, ok, s[i])
					}
				}
				out = append(out, it.Dst)
			}
			sums = append(sums, s...)
		}
		ws.Fetch(out...)
		for i, v := range out {
			if ws.Stale(v) || !merge.Finite(v) {
				t.Fatalf("result %d stale or not finite after Fetch", i)
			}
		}
		stats, _ := ws.Resident()
		return out, sums, stats, tops
	}
	want, wantSums, _, wantTops := run(false, 0)
	for _, slots := range []int{0, 3} {
		got, gotSums, stats, gotTops := run(true, slots)
		if !slices.Equal(gotTops, wantTops) || slices.Contains(wantTops, -1) {
			t.Fatalf("arena of %d slots: top-k index bytes %v, the host's %v", slots, gotTops, wantTops)
		}
		for i := range want {
			if !slices.EqualFunc(got[i], want[i], func(a, b float32) bool { return math.Float32bits(a) == math.Float32bits(b) }) || gotSums[i] != wantSums[i] {
				t.Fatalf("arena of %d slots: mix %d differs from the host's (Σx² %v, want %v)", slots, i, gotSums[i], wantSums[i])
			}
		}
		switch {
		case slots == 0 && (stats.Mixed != 2*k-onHost || stats.Full != 0):
			t.Errorf("room for all: %+v, want %d mixed", stats, 2*k-onHost)
		case slots > 0 && (stats.Full == 0 || stats.Mixed >= 2*k-onHost):
			t.Errorf("an arena of %d slots: %+v, want some mixes on the host", slots, stats)
		}
	}
}
