package daemon

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/gossipd/gossipd/dataset"
	"github.com/gossipd/gossipd/model"
	"github.com/gossipd/gossipd/model/onnx"
)

// Export formats.
const (
	FormatSafetensors = "safetensors" // the tensors under PyTorch's names, the job and scaler in the metadata
	FormatONNX        = "onnx"        // a graph for any ONNX runtime, taking raw features
)

// Formats lists the export formats.
var Formats = []string{FormatSafetensors, FormatONNX}

// ErrFormat is an export format gossipd does not write.
var ErrFormat = errors.New("daemon: unknown export format")

// WriteModelAs writes a model of spec with params in format, with meta
// (modelMetadata's: the job, its ID, the model's age, the scaler) in a
// safetensors file's metadata, or the scaler applied first and the job
// as the doc string of an ONNX graph.
func WriteModelAs(w io.Writer, format string, spec model.Spec, params []float32, meta map[string]string) error {
	switch format {
	case FormatSafetensors, "":
		l, err := model.LayoutOf(spec)
		if err != nil {
			return err
		}
		return model.WriteSafetensors(w, l, params, meta)
	case FormatONNX:
		o := onnx.Options{Doc: "gossipd job " + meta["job_id"] + ": " + meta["job"]}
		if s := meta["scaler"]; s != "" {
			var sc dataset.Scaler
			if err := json.Unmarshal([]byte(s), &sc); err != nil {
				return fmt.Errorf("daemon: the model's scaler: %w", err)
			}
			if sc.Shift != nil {
				o.Shift, o.Mul = sc.Shift, sc.Mul
			}
		}
		return onnx.Write(w, spec, params, o)
	}
	return fmt.Errorf("%w %q, want %s", ErrFormat, format, strings.Join(Formats, " or "))
}

// ErrNoCheckpoint means a store holds no checkpoint to export.
var ErrNoCheckpoint = errors.New("daemon: no checkpoint in the store")

// Export writes the store's newest checkpointed model to w in format
// (WriteModelAs) and returns the checkpoint.
func Export(s *Store, w io.Writer, format string) (*Checkpoint, error) {
	c, err := s.Newest()
	if err != nil {
		return nil, err
	}
	if c == nil {
		return nil, ErrNoCheckpoint
	}
	return c, WriteModelAs(w, format, c.Spec.Model, c.State.Params, c.Meta)
}
