package daemon

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/gossipd/gossipd/internal/cli"
)

// OpenStoreDir opens the store of a daemon's --store directory for a
// command that reads it (export, privacy ledger); a directory that holds
// no store is a usage error naming the flag, and none is created.
func OpenStoreDir(cmd, dir string) (*Store, error) {
	s, err := OpenExistingStore(filepath.Join(dir, "checkpoints"))
	if errors.Is(err, ErrNoStore) {
		return nil, fmt.Errorf("%w: %s: --store %s: %v", cli.ErrUsage, cmd, dir, err)
	}
	return s, err
}

// ExportFile writes the newest checkpoint of the store in a stopped
// daemon's --store directory dir to the file out, as safetensors (Export),
// and returns it; out is removed again if the export fails.
func ExportFile(dir, out, format string) (*Checkpoint, error) {
	store, err := OpenStoreDir("export", dir)
	if err != nil {
		return nil, err
	}
	defer store.Close()
	f, err := os.Create(out)
	if err != nil {
		return nil, err
	}
	c, err := Export(store, f, format)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(out)
		return nil, fmt.Errorf("export %s: %w", dir, err)
	}
	return c, nil
}
