package simulation

import (
	"math"
	"slices"
)

// Spread summarises one figure over the peers: its least and greatest
// value, mean and percentiles (nearest rank).
type Spread struct {
	Min  float64 `json:"min"`
	P1   float64 `json:"p1"`
	P10  float64 `json:"p10"`
	P50  float64 `json:"p50"`
	P90  float64 `json:"p90"`
	Max  float64 `json:"max"`
	Mean float64 `json:"mean"`
}

// spreadOf summarises xs (sorted in place); zero for none.
func spreadOf(xs []float64) Spread {
	if len(xs) == 0 {
		return Spread{}
	}
	slices.Sort(xs)
	var sum float64
	for _, x := range xs {
		sum += x
	}
	rank := func(p float64) float64 {
		i := int(math.Ceil(p/100*float64(len(xs)))) - 1
		return xs[min(max(i, 0), len(xs)-1)]
	}
	return Spread{Min: xs[0], P1: rank(1), P10: rank(10), P50: rank(50), P90: rank(90), Max: xs[len(xs)-1], Mean: sum / float64(len(xs))}
}

// Reach says how evenly the peers heard from each other by the end of a
// run: how many models (gossip.Kind.CarriesModel) each took in, how many
// took in none, and, with Cyclon or HyParView peer sampling, in how many
// views each peer stands (its in-degree).
type Reach struct {
	// PeersNeverReceived is how many peers (the live members, with
	// turnover) took in no model at all: their model is their own.
	PeersNeverReceived int    `json:"peers_never_received"`
	ModelsReceived     Spread `json:"models_received"`
	// ViewInDegree: random walk with --sampling cyclon or hyparview (its
	// active view) only.
	ViewInDegree *Spread `json:"view_in_degree,omitempty"`
	// PeersInNoView is how many peers no view holds (Cyclon or HyParView only): no
	// model can reach them but through their own shuffles.
	PeersInNoView int `json:"peers_in_no_view,omitempty"`
}

// reach measures Reach over the peers given (indices into s.peers).
func (s *sim) reach(peers []int) Reach {
	var r Reach
	got := make([]float64, len(peers))
	for k, i := range peers {
		got[k] = float64(s.peers[i].modelsIn)
		if s.peers[i].modelsIn == 0 {
			r.PeersNeverReceived++
		}
	}
	r.ModelsReceived = spreadOf(got)
	if !s.peers[0].Core().UsesView() {
		return r
	}
	indeg := make(map[string]int, len(s.peers))
	for _, i := range peers {
		for _, m := range s.peers[i].Core().ViewMembers() {
			indeg[m]++
		}
	}
	deg := make([]float64, len(peers))
	for k, i := range peers {
		d := indeg[s.peers[i].ID()]
		deg[k] = float64(d)
		if d == 0 {
			r.PeersInNoView++
		}
	}
	sp := spreadOf(deg)
	r.ViewInDegree = &sp
	return r
}
