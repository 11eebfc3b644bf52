package main

import (
	"errors"
	"fmt"
	"strings"

	"github.com/gossipd/gossipd/dataset"
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
