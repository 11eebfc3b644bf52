package dataset

import (
	"cmp"
	"fmt"
	"strconv"
	"strings"
)

// LoadOptions configures Load.
type LoadOptions struct {
	OpenOptions
	// Shard, "i/n", keeps shard i of n of the training split (seeded by
	// Seed, so the shards of daemons sharing a seed are disjoint).
	// Empty: all of it.
	Shard string
	// Partition is how the shards are cut (ParsePartitioner; default
	// "iid"): "shards:2", say, gives each shard two classes' worth.
	Partition string
	// Scale is the feature scaling (FitScaler), fitted on the training
	// data kept and applied to both splits.
	Scale string
	// Fingerprint sets the training split's Fingerprint field (a content
	// hash of its raw examples, before scaling).
	Fingerprint bool
}

// Load opens a dataset, keeps a shard of its training split if asked and
// scales both splits: every way of getting training data (the daemon,
// the simulator, centralized training) goes through it. The scaler is
// returned for the features of later inputs (/predict, exported models).
func Load(source string, o LoadOptions) (train, test *Dataset, sc *Scaler, err error) {
	if o.Partition != "" && o.Shard == "" {
		return nil, nil, nil, fmt.Errorf("%w: a partition (%q) without a shard to keep", ErrBadPartition, o.Partition)
	}
	if o.Shard != "" {
		i, n, err := ParseShard(o.Shard)
		if err != nil {
			return nil, nil, nil, err
		}
		p, err := ParsePartitioner(cmp.Or(o.Partition, "iid"))
		if err != nil {
			return nil, nil, nil, err
		}
		// The partition needs the labels only: Open decodes just the
		// shard's examples where it can (IDX files).
		o.OpenOptions.KeepTrain = func(y []int32, classes int) ([]int, error) {
			parts, err := p.Partition(&Dataset{N: len(y), Y: y, Classes: classes}, n, o.Seed)
			if err != nil {
				return nil, err
			}
			return parts[i], nil
		}
	}
	if err := vetOptions(source, o.OpenOptions); err != nil { // before the cache, which skips Open
		return nil, nil, nil, err
	}
	if train, test, sc, ok, err := loadCachedIDX(source, o); ok {
		return train, test, sc, err
	}
	train, test, err = Open(source, o.OpenOptions)
	if err != nil {
		return nil, nil, nil, err
	}
	if o.Fingerprint {
		train.Fingerprint = Fingerprint(train)
	}
	if sc, err = FitScaler(o.Scale, train); err != nil {
		return nil, nil, nil, err
	}
	sc.Transform(train)
	sc.Transform(test)
	return train, test, sc, nil
}

// ParseShard reads "i/n" with 0 ≤ i < n.
func ParseShard(s string) (i, n int, err error) {
	a, b, ok := strings.Cut(s, "/")
	i, err1 := strconv.Atoi(a)
	n, err2 := strconv.Atoi(b)
	if !ok || err1 != nil || err2 != nil || n < 1 || i < 0 || i >= n {
		return 0, 0, fmt.Errorf("dataset: shard %q, want i/n with 0 ≤ i < n", s)
	}
	return i, n, nil
}
