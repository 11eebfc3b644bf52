package simulation

import (
	"context"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/gossipd/gossipd/gossip"
	"github.com/gossipd/gossipd/merge"
	"github.com/gossipd/gossipd/model"
	"github.com/gossipd/gossipd/peer/trainer"
)

// runBaseline runs the server-based baselines, which have no protocol core:
//
//   - centralized: one model holding all the training data; each round it
//     does LocalEpochs passes over N/Peers examples, the sequential work one
//     random-walk model does per hop.
//   - fedavg (McMahan et al. 2017): each round a fraction C of the clients
//     start from the global model, train LocalEpochs on their data, and the
//     server averages their models weighted by example counts.
//   - allreduce: synchronous data-parallel SGD; every peer takes one
//     minibatch gradient at the shared model, a ring AllReduce averages
//     them (2·(P−1)/P of the model per peer on the wire) and all step.
func (s *sim) runBaseline(ctx context.Context, res *Result) error {
	cfg := s.cfg
	m, err := model.New(s.spec, model.WithSeed(cfg.Seed))
	if err != nil {
		return err
	}
	global, err := s.initial(m)
	if err != nil {
		return err
	}
	ws := trainer.NewWorkspace(m)
	modelBytes := uint64(gossip.EncodedSize(&gossip.Message{Kind: gossip.KindModel, From: peerName(0), Params: global}))
	var trainers []*trainer.Trainer
	var sizes []int
	if cfg.Protocol == Centralized {
		idx := make([]int, s.train.N)
		for i := range idx {
			idx[i] = i
		}
		t, err := trainer.New(ws, &trainer.Data{X: s.train.X, Y: s.train.Y, D: s.train.D, Idx: idx},
			rand.New(rand.NewPCG(cfg.Seed, 2)), trainer.Config{Batch: cfg.Batch, LR: cfg.LR})
		if err != nil {
			return err
		}
		trainers, sizes = []*trainer.Trainer{t}, []int{s.train.N}
	} else {
		parts, err := s.partition()
		if err != nil {
			return err
		}
		for i, p := range parts {
			t, err := trainer.New(ws, &trainer.Data{X: s.train.X, Y: s.train.Y, D: s.train.D, Idx: p},
				rand.New(rand.NewPCG(cfg.Seed, uint64(i)<<8|2)), trainer.Config{Batch: cfg.Batch, LR: cfg.LR})
			if err != nil {
				return err
			}
			trainers = append(trainers, t)
			sizes = append(sizes, len(p))
		}
	}
	perPeer := (s.train.N + cfg.Peers - 1) / cfg.Peers
	passSteps := func(n int) int { return cfg.LocalEpochs * ((n + cfg.Batch - 1) / cfg.Batch) }
	grad := make([]float32, len(global))
	var id uint64
	s.endRound(0)
	for r := 1; r <= cfg.Rounds; r++ {
		if err := ctx.Err(); err != nil {
			return err
		}
		switch cfg.Protocol {
		case Centralized:
			id++
			out, err := trainers[0].Run(&gossip.TrainRequest{ID: id, Op: gossip.OpUpdate, Params: global, Steps: passSteps(perPeer)})
			if err != nil {
				return err
			}
			global = out.Params
			s.stats.Updates++
		case FedAvg:
			k := max(1, int(cfg.FedAvgFraction*float64(cfg.Peers)+0.5))
			chosen := s.rng.Perm(cfg.Peers)[:k]
			slices.Sort(chosen)
			xs := make([][]float32, k)
			wts := make([]float64, k)
			for c, i := range chosen {
				id++
				out, err := trainers[i].Run(&gossip.TrainRequest{ID: id, Op: gossip.OpUpdate, Params: slices.Clone(global), Steps: passSteps(sizes[i])})
				if err != nil {
					return err
				}
				xs[c], wts[c] = out.Params, float64(sizes[i])
			}
			if err := merge.Weighted(global, xs, wts); err != nil {
				return err
			}
			s.stats.Messages += 2 * uint64(k)
			s.stats.Bytes += 2 * uint64(k) * modelBytes
			s.stats.Updates += uint64(k)
		case AllReduce:
			clear(grad)
			for _, t := range trainers {
				id++
				out, err := t.Run(&gossip.TrainRequest{ID: id, Op: gossip.OpGradient, Params: slices.Clone(global)})
				if err != nil {
					return err
				}
				merge.Axpy(grad, 1/float32(len(trainers)), out.Grad)
			}
			merge.Axpy(global, -float32(cfg.LR), grad)
			P := uint64(len(trainers))
			s.stats.Messages += 2 * P * (P - 1)
			s.stats.Bytes += 2 * (P - 1) * modelBytes
			s.stats.Updates += P
		}
		s.now = s.cfg.Delta * time.Duration(r)
		if r%cfg.EvalEvery == 0 || r == cfg.Rounds {
			row, err := s.eval.row([][]float32{global}, []int{0}, s.eval.sub)
			if err != nil {
				return err
			}
			row.Round, row.Time = r, s.now.Seconds()
			row.Messages, row.Bytes, row.Online = s.stats.Messages, s.stats.Bytes, len(trainers)
			res.Rows = append(res.Rows, row)
			if s.onRound != nil {
				s.onRound(row)
			}
		}
		s.endRound(r)
	}
	fr, err := s.eval.row([][]float32{global}, []int{0}, s.test)
	if err != nil {
		return err
	}
	res.FinalAccuracy, res.FinalMinAccuracy, res.FinalMaxAccuracy, res.FinalLoss = fr.MeanAcc, fr.MinAcc, fr.MaxAcc, fr.MeanLoss
	res.EvaluatedPeers = 1
	return nil
}
