package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"github.com/gossipd/gossipd/daemon"
)

// storeStatus prints the report of a stopped daemon's store (status
// --store); a damaged store is printed, then an error.
func storeStatus(dir string, stdout io.Writer) error {
	rep, err := daemon.InspectStore(filepath.Join(dir, "checkpoints"))
	if errors.Is(err, daemon.ErrNoStore) {
		return fmt.Errorf("%w: status: --store %s: %v", errUsage, dir, err)
	}
	if err != nil {
		return err
	}
	b, _ := json.MarshalIndent(rep, "", "  ")
	fmt.Fprintf(stdout, "%s\n", b)
	if !rep.Healthy {
		return fmt.Errorf("%w: %s: %s; `gossipd run --store-recover` keeps what is readable", daemon.ErrDamaged, rep.Dir, strings.Join(rep.Damage, "; "))
	}
	return nil
}

// openExistingStore opens a stopped daemon's store (daemon.OpenStoreDir).
func openExistingStore(cmd, dir string) (*daemon.Store, error) { return daemon.OpenStoreDir(cmd, dir) }
