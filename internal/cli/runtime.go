package cli

import (
	"cmp"
	"errors"
	"fmt"
	"runtime/debug"
	"strings"

	"github.com/gossipd/gossipd/dataset"
)

// ConfigUsage turns a package's configuration error (one wrapping
// sentinel, such as simulation.ErrConfig) into a usage error without the
// sentinel's words: the user ran a command and named flags, not a
// package.
func ConfigUsage(err, sentinel error) error {
	return fmt.Errorf("%w: %s", ErrUsage, WithoutSentinel(err, sentinel))
}

// WithoutSentinel is err's text without sentinel's words in front.
func WithoutSentinel(err, sentinel error) string {
	return strings.TrimPrefix(err.Error(), sentinel.Error()+": ")
}

// DatasetUsage turns the loader's refusal of an option the source has no
// use for into a usage error naming the flag; other errors pass as they
// are.
func DatasetUsage(err error) error {
	switch {
	case errors.Is(err, dataset.ErrOwnTestSplit):
		return fmt.Errorf("%w: --test-fraction: %v", ErrUsage, err)
	case errors.Is(err, dataset.ErrNotCSV):
		return fmt.Errorf("%w: --label-column: %v", ErrUsage, err)
	}
	return err
}

// SetMemoryLimit applies --memory-limit (a size such as 192MiB; "" leaves
// the runtime's own: $GOMEMLIMIT or none): a soft limit of the Go
// runtime, near which the collector runs more often instead of letting
// the heap double.
func SetMemoryLimit(s string) error {
	if s == "" {
		return nil
	}
	n, err := ParseBytes(s)
	if err != nil || n == 0 {
		return fmt.Errorf("%w: --memory-limit: %v", ErrUsage, cmp.Or(err, errors.New("must be positive")))
	}
	debug.SetMemoryLimit(n)
	return nil
}
