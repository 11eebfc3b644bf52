package apiclient

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"time"

	"github.com/gossipd/gossipd/model"
)

// ExportModel writes a running daemon's current model (its GET /model) to
// the file out, after checking that it is a safetensors file, and returns
// its tensor count, its metadata and the API's base URL.
func (f Flags) ExportModel(ctx context.Context, out string) (tensors int, meta map[string]string, base string, err error) {
	b, base, err := f.Request(ctx, "export", http.MethodGet, "/model", time.Minute)
	if err != nil {
		return 0, nil, base, err
	}
	_, vals, meta, err := model.ReadSafetensors(b)
	if err != nil {
		return 0, nil, base, fmt.Errorf("export: %s/model: %w", base, err)
	}
	if err := os.WriteFile(out, b, 0o644); err != nil {
		return 0, nil, base, err
	}
	return len(vals), meta, base, nil
}

// ExportONNX writes a running daemon's current model as ONNX (its GET
// /model?format=onnx) to the file out and returns its size and the
// API's base URL.
func (f Flags) ExportONNX(ctx context.Context, out string) (size int, base string, err error) {
	b, base, err := f.Request(ctx, "export", http.MethodGet, "/model?format=onnx", time.Minute)
	if err != nil {
		return 0, base, err
	}
	if len(b) == 0 {
		return 0, base, fmt.Errorf("export: %s/model?format=onnx: an empty answer", base)
	}
	return len(b), base, os.WriteFile(out, b, 0o644)
}
