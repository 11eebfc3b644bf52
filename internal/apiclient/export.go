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
