package node

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/gossipd/gossipd/model"
)

// ErrNoCheckpoint means a store holds no checkpoint to export.
var ErrNoCheckpoint = errors.New("node: no checkpoint in the store")

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

// ParseMembers reads a job's member list: peer IDs, comma-separated, or
// @FILE with one per line (blank lines and # comments ignored). Each ID is
// checked by check; errors name the source and the member's position.
func ParseMembers(s string, check func(string) error) ([]string, error) {
	src := "members"
	if path, ok := strings.CutPrefix(s, "@"); ok {
		b, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("node: members: %w", err)
		}
		var ids []string
		for _, line := range strings.Split(string(b), "\n") {
			line, _, _ = strings.Cut(line, "#")
			if line = strings.TrimSpace(line); line != "" {
				ids = append(ids, line)
			}
		}
		s, src = strings.Join(ids, ","), path
	}
	var ids []string
	for _, id := range strings.Split(s, ",") {
		if id = strings.TrimSpace(id); id != "" {
			ids = append(ids, id)
		}
	}
	for i, id := range ids {
		if err := check(id); err != nil {
			return nil, fmt.Errorf("node: %s: member %d: %w", src, i+1, err)
		}
	}
	return ids, nil
}
