package daemon

import (
	"errors"
	"fmt"
	"slices"

	"github.com/gossipd/gossipd/gossip"
	"github.com/gossipd/gossipd/model"
	"github.com/gossipd/gossipd/model/device"
	"github.com/gossipd/gossipd/peer/trainer"
)

// train carries out req on the peer's trainer (train goroutine). On a
// device backend a failure does not end the daemon: the backend panics
// on a CUDA error (out of memory, a lost GPU, a fault in a kernel),
// training moves to the CPU for good, req runs again there from its own
// parameters, and /status says what happened. The CPU backend's panics
// are programming errors and stay panics.
func (n *Node) train(req *gossip.TrainRequest) (*gossip.TrainResult, error) {
	if n.onCPU || n.cfg.device.Device == "cpu" {
		return n.peer.Run(req)
	}
	if err := req.Resolve(); err != nil {
		return nil, err
	}
	params := slices.Clone(req.Params) // a failure may leave req's half written
	r, err := n.tryDevice(req)
	var failed *deviceFailure
	if !errors.As(err, &failed) {
		return r, err
	}
	if err := n.leaveDevice(failed.v); err != nil {
		return nil, err
	}
	req.Params = params
	return n.peer.Run(req)
}

// deviceFailure is a device backend's panic, as an error.
type deviceFailure struct{ v any }

func (f *deviceFailure) Error() string { return fmt.Sprint(f.v) }

// tryDevice runs req, turning the device backend's panic into a
// *deviceFailure.
func (n *Node) tryDevice(req *gossip.TrainRequest) (r *gossip.TrainResult, err error) {
	defer func() {
		if p := recover(); p != nil {
			r, err = nil, &deviceFailure{p}
		}
	}()
	return n.peer.Run(req)
}

// leaveDevice moves training to the CPU after the device failed, and
// says so in the log and in /status's device.
func (n *Node) leaveDevice(failure any) error {
	be, choice, err := device.Open(device.Spec{Kind: "cpu"})
	var m *model.Model
	if err == nil {
		m, err = model.New(n.cfg.Job.Model, model.WithBackend(be))
	}
	if err != nil {
		return fmt.Errorf("daemon: training on %s failed (%v), and the CPU cannot take over: %w", n.cfg.device.Device, failure, err)
	}
	n.trainer.Move(trainer.NewWorkspace(m))
	n.onCPU = true
	choice.Requested = n.cfg.device.Requested
	choice.Note = fmt.Sprintf("%s failed: %v; training moved to the CPU", n.cfg.device.Device, failure)
	n.log.Error("training device failed: training moved to the CPU", "device", n.cfg.device.Device, "err", failure, "backend", choice.Backend)
	n.mu.Lock()
	n.status.Device = choice
	n.mu.Unlock()
	n.met.deviceFailed.Set(1)
	return nil
}
