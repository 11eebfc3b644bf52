package main

import (
	"github.com/gossipd/gossipd/bench"
	"github.com/gossipd/gossipd/dataset"
	"github.com/gossipd/gossipd/model/compute"
	"github.com/gossipd/gossipd/model/compute/cuda"
)

// envNotFlags are the GOSSIPD_* variables that are not run's flags, which
// cli.CheckEnv lets pass: any other is a misspelt setting.
var envNotFlags = []string{
	compute.KernelEnv, dataset.CacheDirEnv, dataset.DataDirEnv, cuda.DirEnv, bench.SeedsEnv,
	"GOSSIPD_IMAGE", // the image deploy/compose.yaml runs
	// Read by the tests, which start daemons in their environment.
	"GOSSIPD_PYTHON", "GOSSIPD_ARTIFACTS", "GOSSIPD_BENCH_PROCS", "GOSSIPD_ABICHECK_LIB",
}
