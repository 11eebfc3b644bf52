package daemon

import (
	"errors"
	"io"

	"github.com/gossipd/gossipd/model"
)

// ErrNoCheckpoint means a store holds no checkpoint to export.
var ErrNoCheckpoint = errors.New("daemon: no checkpoint in the store")

// Export writes the store's newest checkpointed model to w as
// safetensors, with the job spec and the feature scaler in its metadata,
// and returns the checkpoint.
func Export(s *Store, w io.Writer) (*Checkpoint, error) {
	c, err := s.Newest()
	if err != nil {
		return nil, err
	}
	if c == nil {
		return nil, ErrNoCheckpoint
	}
	l, err := model.LayoutOf(c.Spec.Model)
	if err != nil {
		return nil, err
	}
	return c, model.WriteSafetensors(w, l, c.State.Params, c.Meta)
}
