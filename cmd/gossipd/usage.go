package main

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"runtime/debug"
	"strings"

	"github.com/gossipd/gossipd/dataset"
	"github.com/gossipd/gossipd/internal/cli"
	"github.com/gossipd/gossipd/node"
)

// configUsage turns a package's configuration error (one wrapping
// sentinel, such as simulation.ErrConfig) into a usage error without the
// sentinel's words: the user ran a command and named flags, not a
// package.
func configUsage(err, sentinel error) error {
	return fmt.Errorf("%w: %s", errUsage, strings.TrimPrefix(err.Error(), sentinel.Error()+": "))
}

// datasetUsage turns the loader's refusal of an option the source has no
// use for into a usage error naming the flag; other errors pass as they
// are.
func datasetUsage(err error) error {
	switch {
	case errors.Is(err, dataset.ErrOwnTestSplit):
		return fmt.Errorf("%w: --test-fraction: %v", errUsage, err)
	case errors.Is(err, dataset.ErrNotCSV):
		return fmt.Errorf("%w: --label-column: %v", errUsage, err)
	}
	return err
}

// openExistingStore opens the store of a daemon's --store directory for a
// command that reads it (export, privacy ledger); a directory that holds
// no store is a usage error naming the flag, and none is created.
func openExistingStore(cmd, dir string) (*node.Store, error) {
	s, err := node.OpenExistingStore(filepath.Join(dir, "checkpoints"))
	if errors.Is(err, node.ErrNoStore) {
		return nil, fmt.Errorf("%w: %s: --store %s: %v", errUsage, cmd, dir, err)
	}
	return s, err
}

// setMemoryLimit applies --memory-limit (a size such as 192MiB; "" leaves
// the runtime's own: $GOMEMLIMIT or none): a soft limit of the Go
// runtime, near which the collector runs more often instead of letting
// the heap double.
func setMemoryLimit(s string) error {
	if s == "" {
		return nil
	}
	n, err := cli.ParseBytes(s)
	if err != nil || n == 0 {
		return fmt.Errorf("%w: --memory-limit: %v", errUsage, cmp.Or(err, errors.New("must be positive")))
	}
	debug.SetMemoryLimit(n)
	return nil
}

// storeStatus prints the report of a stopped daemon's store (status
// --store); a damaged store is printed, then an error.
func storeStatus(dir string, stdout io.Writer) error {
	rep, err := node.InspectStore(filepath.Join(dir, "checkpoints"))
	if errors.Is(err, node.ErrNoStore) {
		return fmt.Errorf("%w: status: --store %s: %v", errUsage, dir, err)
	}
	if err != nil {
		return err
	}
	b, _ := json.MarshalIndent(rep, "", "  ")
	fmt.Fprintf(stdout, "%s\n", b)
	if !rep.Healthy {
		return fmt.Errorf("%w: %s: %s; `gossipd run --store-recover` keeps what is readable", node.ErrDamaged, rep.Dir, strings.Join(rep.Damage, "; "))
	}
	return nil
}
