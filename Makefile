# gossipd — build, test, demo and benchmarks. See README.md.

GO       ?= go
BIN      := bin/gossipd
VERSION  ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS  := -s -w -X main.version=$(VERSION)
PKGS     := ./...
FUZZTIME ?= 20000x
REFERENCE ?= ../shared/reference/torch_baseline.py
# The ARM builds' flags, TestCrossArch's (cmd/gossipd/qemu_test.go): make
# cross and cuda-check build with them too, so that each later build finds
# the packages in the build cache (about 2 minutes each on a cold cache).
ARMFLAGS := -trimpath -ldflags '-s -w'

export CGO_ENABLED ?= 0

.PHONY: all build build-cuda cuda-check gpu-bundle image e2e-images compose-v2 e2e qemu deploy-check dashboard demo test vet fmt-check unit race noasm kernels fuzz cross bench bench-go robustness turnover commtable soak fleet clean

all: build

build: ## build bin/gossipd (pure Go)
	$(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN) ./cmd/gossipd

# The CUDA build: still without cgo, but with the loader that opens the
# NVIDIA driver at run time (model/compute/cuda, through purego), which
# needs the system's dynamic loader, so it is a dynamically linked
# executable; bin/gossipd stays static for containers and small boards.
build-cuda: ## build bin/gossipd-cuda (linux amd64/arm64; loads libcuda.so.1 at run time)
	$(GO) build -tags cuda -trimpath -ldflags '$(LDFLAGS)' -o bin/gossipd-cuda ./cmd/gossipd

# The CUDA build's checks on a machine without a GPU: vet, the loader's
# tests against a stand-in libcuda.so.1 compiled with gcc, the device
# choice, and the arm64 cross build.
cuda-check:
	$(GO) vet -tags cuda ./model/compute/cuda ./model/device ./cmd/gossipd
	$(GO) test -tags cuda -count=1 ./model/compute/cuda ./model/device
	$(GO) build -tags cuda -o /dev/null ./cmd/gossipd
	CGO_ENABLED=0 GOOS=linux GOARCH=arm64 $(GO) build -tags cuda $(ARMFLAGS) -o /dev/null ./cmd/gossipd

# gpu-bundle: what a GPU machine without Go runs (docs/how-to/use-a-gpu.md): the CUDA
# build (the PyTorch reference is built in) and the CUDA backend's tests as
# a binary (TestCUDAConformance runs the checks on the GPU; the emulated
# ones need g++ there too), the ONNX export's (TestONNXRuntime runs the
# exported models in onnxruntime, which those machines have), the
# simulator's (BenchmarkHostWork: the host's share), stripped
# and gzipped, with Fashion-MNIST for
# GOSSIPD_DATA_DIR: bin/gpu, about 60 MB, under the device tool's 64 MiB
# a call (bench/gpu-check.sh unpacks it there).
gpu-bundle:
	rm -rf bin/gpu && mkdir -p bin/gpu/data/fashion-mnist
	$(GO) build -tags cuda -trimpath -ldflags '-s -w' -o bin/gpu/gossipd-cuda ./cmd/gossipd
	$(GO) test -c -tags cuda -ldflags '-s -w' -o bin/gpu/cuda.test ./model/compute/cuda
	$(GO) test -c -ldflags '-s -w' -o bin/gpu/onnx.test ./model/onnx
	$(GO) test -c -ldflags '-s -w' -o bin/gpu/simulation.test ./simulation
	gzip -9 bin/gpu/gossipd-cuda bin/gpu/cuda.test bin/gpu/onnx.test bin/gpu/simulation.test
	cp /usr/share/datasets/fashion-mnist/*.gz bin/gpu/data/fashion-mnist/

IMAGE ?= gossipd:dev

# The container image: FROM scratch around the static binary (deploy/Dockerfile).
image:
	rm -rf deploy/.build && mkdir -p deploy/.build/data
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o deploy/.build/gossipd ./cmd/gossipd
	docker build -q -t $(IMAGE) -f deploy/Dockerfile deploy/.build >/dev/null
	@echo "$(IMAGE): $$(docker image inspect -f '{{.Size}}' $(IMAGE) | awk '{printf "%.1f MB", $$1/1e6}')"

LINKEMU_IMAGE ?= gossipd-linkemu:dev

# The e2e suite's helper image: linkemu, a packet delayer (this kernel has
# no netem) and a NAT router's process (deploy/e2e/linkemu).
e2e-images: image
	rm -rf deploy/.build-e2e && mkdir -p deploy/.build-e2e
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '-s -w' -o deploy/.build-e2e/linkemu ./deploy/e2e/linkemu
	docker build -q -t $(LINKEMU_IMAGE) -f deploy/e2e/linkemu/Dockerfile deploy/.build-e2e >/dev/null
	@echo "$(LINKEMU_IMAGE): $$(docker image inspect -f '{{.Size}}' $(LINKEMU_IMAGE) | awk '{printf "%.1f MB", $$1/1e6}')"

# Compose v2, for the e2e suite to run the compose files with both
# versions: this machine has docker-compose v1 only, and no plugin can be
# downloaded, but Compose v2 is a Go module (cached by the Go build cache).
COMPOSE_V2_VERSION ?= v2.29.7
COMPOSE_V2 := $(CURDIR)/bin/compose-$(COMPOSE_V2_VERSION)/cmd
compose-v2: $(COMPOSE_V2)
$(COMPOSE_V2):
	GOBIN=$(dir $(COMPOSE_V2)) $(GO) install github.com/docker/compose/v2/cmd@$(COMPOSE_V2_VERSION)

# End-to-end: clusters of containers on the Docker engine (deploy/e2e):
# converge, bad links (loss, rate limits, delay), a 2|3 partition and its
# heal, kill -9 and restart, the liveness of a dead peer, a late joiner,
# an address change, for random walk, D-PSGD and push-sum; two peers
# behind NATs (relay, hole punching); deploy/compose.yaml and
# deploy/consortium with Compose v1 and v2. Needs Docker, docker-compose
# and root (nsenter, iptables). Timings go to e2e-logs/timings.md.
e2e: e2e-images compose-v2
	$(GO) vet -tags e2e ./deploy/e2e
	COMPOSE_V2=$(COMPOSE_V2) $(GO) test -tags e2e -count=1 -v -timeout 20m ./deploy/e2e

robustness: build ## regenerate docs/explanation/robustness-results.md (every aggregator under every attack)
	$(BIN) robustness --out docs/explanation/robustness-results.md

turnover: build ## regenerate the turnover table of docs/explanation/simulation.md (needs dataset-fashion-mnist)
	$(BIN) turnover --update docs/explanation/simulation.md

COMM_SOFTMAX = dpsgd/none/0.5,dpsgd/fp16/0.5,dpsgd/int8/0.5,dpsgd/topk:0.01/0.5,dpsgd/none/0.5/10,dpsgd/none/0.5/50,dpsgd/topk:0.05/0.5,dpsgd/int8/0.5/10,pushsum/none/0.5,pushsum/fp16/0.5,pushsum/int8/0.5,pushsum/topk:0.01/0.5,pushsum/none/0.5/10,pushsum/none/0.5/50,pushsum/int8/0.5/10,adpsgd/none/0.5,adpsgd/fp16/0.5,adpsgd/int8/0.5,adpsgd/topk:0.01/0.5,adpsgd/none/0.5/10,adpsgd/none/0.5/50,adpsgd/int8/0.5/10,sfb/none/0.5,sfb/fp16/0.5,sfb/int8/0.5,sfb/topk:0.01/0.5,sfb/none/0.5/10,sfb/none/0.5/50,sfb/topk:0.01/0.5/50,randomwalk/none/0.1,randomwalk/fp16/0.1,randomwalk/int8/0.1,randomwalk/topk:0.01/0.1,randomwalk/none/0.1/10,randomwalk/none/0.1/50,randomwalk/int8/0.1/10,randomwalk/int8/0.1/50,randomwalk/subsample:0.1/0.1,randomwalk/subsample:0.2+int8/0.1,randomwalk/subsample:0.1+int8/0.1
COMM_MLP = dpsgd/none/0.5,dpsgd/fp16/0.5,dpsgd/int8/0.5,dpsgd/topk:0.01/0.5,dpsgd/none/0.5/10,dpsgd/none/0.5/50,dpsgd/int8/0.5/10,pushsum/none/0.5,pushsum/fp16/0.5,pushsum/int8/0.5,pushsum/topk:0.01/0.5,pushsum/none/0.5/10,pushsum/none/0.5/50,pushsum/int8/0.5/10,adpsgd/none/0.5,adpsgd/fp16/0.5,adpsgd/int8/0.5,adpsgd/topk:0.01/0.5,adpsgd/none/0.5/10,adpsgd/none/0.5/50,adpsgd/int8/0.5/10,randomwalk/none/0.1,randomwalk/fp16/0.1,randomwalk/int8/0.1,randomwalk/topk:0.01/0.1,randomwalk/none/0.1/10,randomwalk/none/0.1/50,randomwalk/int8/0.1/10,randomwalk/int8/0.1/50,randomwalk/subsample:0.2+int8/0.1,randomwalk/subsample:0.1+int8/0.1
COMM_MLP_SFB = sfb/none/0.5,sfb/fp16/0.5,sfb/int8/0.5,sfb/topk:0.01/0.5,sfb/none/0.5/10,sfb/none/0.5/50,sfb/topk:0.01/0.5/50
COMM_MLP_RW = randomwalk/none/0.1,randomwalk/subsample:0.3+int8/0.1,randomwalk/subsample:0.25+int8/0.1
COMM_1000 = dpsgd/none/0.5,dpsgd/fp16/0.5,dpsgd/int8/0.5,dpsgd/topk:0.01/0.5,dpsgd/none/0.5/10,dpsgd/none/0.5/50,pushsum/none/0.5,pushsum/fp16/0.5,pushsum/int8/0.5,pushsum/topk:0.01/0.5,pushsum/none/0.5/10,pushsum/none/0.5/50,adpsgd/none/0.5,adpsgd/fp16/0.5,adpsgd/int8/0.5,adpsgd/topk:0.01/0.5,adpsgd/none/0.5/10,adpsgd/none/0.5/50,randomwalk/none/0.1,randomwalk/fp16/0.1,randomwalk/int8/0.1,randomwalk/none/0.1/10,randomwalk/none/0.1/50,randomwalk/int8/0.1/10,randomwalk/int8/0.1/50,randomwalk/subsample:0.2+int8/0.1,randomwalk/subsample:0.5+int8/0.1
commtable: build ## regenerate docs/explanation/communication.md's bytes-to-accuracy tables (needs dataset-fashion-mnist; about an hour on 2 cores)
	$(BIN) commtable --update docs/explanation/communication.md --section commtable-softmax --peers 100 --rounds 150 --target 0.65 --runs $(COMM_SOFTMAX)
	$(BIN) commtable --update docs/explanation/communication.md --section commtable-mlp --model mlp --hidden 128 --peers 100 --rounds 100 --target 0.6 --runs $(COMM_MLP)
	$(BIN) commtable --update docs/explanation/communication.md --section commtable-mlp-sfb --model mlp --hidden 128 --peers 100 --rounds 30 --target 0.6 --runs $(COMM_MLP_SFB)
	$(BIN) commtable --update docs/explanation/communication.md --section commtable-mlp-rw --model mlp --hidden 128 --peers 100 --rounds 100 --target 0.6 --runs $(COMM_MLP_RW)
	$(BIN) commtable --update docs/explanation/communication.md --section commtable-1000 --peers 1000 --rounds 60 --target 0.6 --runs $(COMM_1000)

demo: build ## watch 8 local daemons learn together from non-IID pieces of digits, no server (about half a minute)
	$(BIN) demo

# The full check that CI runs: static checks, the race-detector suite, the
# pure-Go (noasm) build, every kernel set forced in turn, brief fuzzing of
# every decoder, cross builds and the CUDA build's loader.
test: vet fmt-check race noasm kernels fuzz cross cuda-check qemu deploy-check dashboard

vet:
	$(GO) vet $(PKGS)

fmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi

# The race detector needs cgo. -parallel 4: the daemon tests
# (cmd/gossipd, t.Parallel) mostly wait on daemons in their own processes,
# so four at a time even on two cores (on 2 vCPUs of an AMD EPYC, the
# package took 312 s one test at a time in a whole race run, beside the
# other packages, and 116 s four at a time, alone).
# The race detector slows the simulator's tests about tenfold: they train
# CNNs under every protocol, and take longer than go test's default 10
# minutes on a loaded 2-core machine.
# The two longest packages are named first: go test starts packages in
# the order they are named, as many at a time as there are cores, and the
# simulator's, last in ./...'s order, started once most others were done
# and set the step's pace.
RACE_FIRST := ./simulation ./cmd/gossipd
race:
	CGO_ENABLED=1 $(GO) test -race -count=1 -parallel 4 -timeout 40m $(RACE_FIRST) $(PKGS)

unit:
	$(GO) test -count=1 -parallel 4 $(PKGS)

noasm:
	$(GO) test -count=1 -tags noasm ./model/... ./dataset

# The model, trainer and simulator tests once per kernel set, forced with
# $$GOSSIPD_KERNEL: pure Go, AVX2/FMA and AVX-512 where this CPU runs them
# (a CPU without AVX-512 cannot execute those kernels; the line says so).
# The simulator's slow accuracy checks (trimmed() in its tests) run in
# full on the set this CPU picks by itself; on the others, -short and
# of the simulator's tests those whose paths differ by kernel set: every
# protocol and model trained, batched peers, DP-SGD, CNNs, SFB's factors,
# PyTorch's weights, merges and mixes on a device against the host's (the
# kernels themselves are checked against float64 sums on every set by
# the model packages' tests). Each name must match a test: a renamed one
# fails the target.
# On every CPU, the AVX2 and AVX-512 kernels' generated assembly also runs
# on the instruction interpreter of model/compute (x86emu_test.go: the
# TestEmulated tests, in the race and noasm runs too), which is checked
# against the hardware where the CPU has it.
KERNEL_SIM_TESTS = TestEveryProtocolLearns TestPeerBatch TestDPSimulation TestLayeredModelDeterministic TestDeterministic \
	TestSFBHybrid TestInitFrom TestMixesOnDevice TestPeersOnDevice
space := $(empty) $(empty)
KERNEL_SIM_RUN = '^($(subst $(space),|,$(strip $(KERNEL_SIM_TESTS))))$$'
kernels: build
	$(GO) test -count=1 -v -run 'Emulat' ./model/compute
	@listed=$$($(GO) test -list $(KERNEL_SIM_RUN) ./simulation | grep -c '^Test'); \
	[ "$$listed" -eq $(words $(KERNEL_SIM_TESTS)) ] || { echo "kernels: KERNEL_SIM_TESTS names $(words $(KERNEL_SIM_TESTS)) tests, ./simulation has $$listed of them"; exit 1; }

	@own=$$(env -u GOSSIPD_KERNEL $(BIN) version | sed -n 's|.*compute cpu/\([a-z0-9]*\).*|\1|p'); \
	[ -n "$$own" ] || { echo "kernels: gossipd version does not name this CPU's kernel set"; exit 1; }; \
	for k in go avx2 avx512; do \
		if GOSSIPD_KERNEL=$$k $(BIN) version >/dev/null 2>&1; then \
			if [ "$$k" = "$$own" ]; then echo "== GOSSIPD_KERNEL=$$k (this CPU's own: the simulator's slow checks in full)"; \
				GOSSIPD_KERNEL=$$k $(GO) test -count=1 ./model/... ./peer/... ./central ./simulation || exit 1; \
			else echo "== GOSSIPD_KERNEL=$$k -short (the simulator's slow checks trimmed, as under the race detector; of its tests, those whose paths differ by kernel set)"; \
				GOSSIPD_KERNEL=$$k $(GO) test -count=1 -short ./model/... ./peer/... ./central || exit 1; \
				GOSSIPD_KERNEL=$$k $(GO) test -count=1 -short -run $(KERNEL_SIM_RUN) ./simulation || exit 1; \
			fi; \
		else \
			echo "== GOSSIPD_KERNEL=$$k: this CPU cannot run these kernels natively; their code ran on the interpreter above"; \
		fi; \
	done

# Every decoder has a fuzz target; CI runs each briefly, for a fixed number
# of executions (a time limit can end a run while a worker is mid-input and
# fail it with "context deadline exceeded").
FUZZ_TARGETS := ./daemon:FuzzDecodeRecord ./dataset:FuzzReadIDX ./dataset:FuzzReadCache ./dataset:FuzzReadCSV ./dataset:FuzzReadLIBSVM ./gossip:FuzzDecode \
	./daemon/p2p:FuzzReadFrame ./daemon/p2p:FuzzParsePEX ./model:FuzzReadSafetensors \
	./daemon/p2p:FuzzParseConsortium ./daemon/p2p:FuzzDecodeAnnouncement ./daemon:FuzzDecodeCheckpoint ./daemon:FuzzDecodeLedger ./job:FuzzParseSpec ./daemon:FuzzDecodeAccounts \
	./gossip:FuzzEdgeList ./simulation:FuzzParseChurnTrace ./simulation:FuzzParseComputeTrace ./simulation:FuzzReadCSV ./simulation:FuzzParseLatency ./simulation:FuzzParseCompute ./cmd/gossipd:FuzzConfigFile ./cmd/gossipd:FuzzFlagSpecs \
	./peer:FuzzReceive ./deploy/e2e/linkemu:FuzzParse ./daemon/p2p:FuzzParseIDResponse \
	./daemon/apiserver:FuzzParseToken ./daemon/apiserver:FuzzGuard ./gossip/compress:FuzzDecode ./model/nn:FuzzParse ./privacy/secagg:FuzzShare ./privacy/secagg:FuzzParseShares ./privacy/secagg:FuzzOpen

# Each package's test binary is built once, instrumented for fuzzing
# (go test -c -fuzz), and runs its targets itself from the package's
# directory, with the flags go test -fuzz gives it and the corpus where
# go test keeps it: one go test -fuzz a target linked the binary anew
# each time, most of this target's time.
fuzz:
	@mkdir -p bin/fuzz; cache=$$($(GO) env GOCACHE) && mod=$$($(GO) list -m) && [ -n "$$cache" ] || { echo "fuzz: no GOCACHE or module"; exit 1; }; \
	for pkg in $$(printf '%s\n' $(FUZZ_TARGETS) | sed 's/:.*//' | sort -u); do \
		$(GO) test -c -fuzz=. -o "bin/fuzz/$$(echo $${pkg#./} | tr / _).test" $$pkg || exit 1; \
	done; \
	for t in $(FUZZ_TARGETS); do \
		pkg=$${t%%:*}; fn=$${t#*:}; echo "== $$pkg $$fn"; \
		(cd $$pkg && "$(CURDIR)/bin/fuzz/$$(echo $${pkg#./} | tr / _).test" -test.run '^$$' -test.fuzz "^$$fn\$$" \
			-test.fuzztime $(FUZZTIME) -test.timeout 10m -test.paniconexit0 \
			-test.fuzzcachedir "$$cache/fuzz/$$mod/$${pkg#./}") || exit 1; \
	done

# The linux/arm64 and linux/arm (v7) binaries run under qemu-user
# (Debian's qemu-user-static): training on digits and a two-node exchange.
qemu:
	$(GO) vet -tags qemu ./cmd/gossipd
	$(GO) test -tags qemu -run '^TestCrossArch$$' -count=1 -v ./cmd/gossipd
	@# The arm64 NEON kernels, checked for correctness only (qemu-user
	@# says nothing about their speed) against the naive GEMM and the
	@# pure-Go kernels, and the amd64 kernels' assembly on the interpreter
	@# (run from the package's directory, where the .s files are).
	GOARCH=arm64 $(GO) test -c -o bin/compute-arm64.test ./model/compute
	GOARCH=arm64 $(GO) test -c -o bin/model-arm64.test ./model
	GOARCH=arm64 $(GO) test -c -o bin/nn-arm64.test ./model/nn
	cd model/compute && qemu-aarch64-static ../../bin/compute-arm64.test -test.run 'Gemm|Kernel|Exp|Emulat|Conformance|Im2col|MaxPool|Shifted'
	cd model && qemu-aarch64-static ../bin/model-arm64.test
	cd model/nn && qemu-aarch64-static ../../bin/nn-arm64.test -test.run 'AgainstPyTorch'
	@# The CUDA loader's bindings called into C on arm64 (Jetson, Grace):
	@# the ABI stand-ins built with the aarch64 cross compiler, the test
	@# binary run with the aarch64 C library under qemu-user.
	GOARCH=arm64 $(GO) test -c -tags cuda -o bin/cuda-arm64.test ./model/compute/cuda
	aarch64-linux-gnu-gcc -shared -fPIC -Wall -Werror -o bin/libabicheck-arm64.so model/compute/cuda/testdata/abicheck.c
	cd model/compute/cuda && GOSSIPD_ABICHECK_LIB=$(CURDIR)/bin/libabicheck-arm64.so QEMU_LD_PREFIX=/usr/aarch64-linux-gnu \
		qemu-aarch64-static ../../../bin/cuda-arm64.test -test.run '^(TestBindingsABI|TestBindingsRegister)$$' -test.v

# The dashboard of a running daemon in headless Chromium (Debian's
# chromium): no console errors, live, charts with the daemon's points;
# screenshots (phone and desktop widths) kept in test-artifacts/.
dashboard:
	$(GO) vet -tags chromium ./cmd/gossipd
	$(GO) test -tags chromium -run '^(TestDashboard|TestDashboardRendering)$$' -count=1 -v ./cmd/gossipd

# The deployment files, read by their own tools: systemd-analyze (verify,
# security), promtool (config, rules, rule unit tests), kubectl kustomize
# (the rendered objects, and the ConfigMap's settings start a daemon), and
# the series the rules and the Grafana dashboard use.
deploy-check:
	$(GO) vet -tags deploytools ./deploy
	$(GO) test -tags deploytools -count=1 -v ./deploy

# The soak test (cmd/gossipd/soak_test.go; not part of make test, see
# docs/how-to/run-the-tests.md "The soak test"): for each protocol, a job of three
# daemons with DP-SGD and a checkpoint every 2 updates takes SOAK_KILLS
# kill -9s of random members, full-disk episodes on a small tmpfs (needs
# root, else they are skipped and the report says why), a damaged store,
# and a daemon of another job beside it; meanwhile a five-member job runs
# for SOAK_DURATION with churn, watched for leaks. With the defaults about
# 1 h 10 min on 2 cores (the long run sets the pace). The report goes to
# soak-report.md (SOAK_REPORT); a failed run keeps the daemons' logs in
# soak-logs/. Knobs, from the environment or make's command line:
# SOAK_KILLS (300 per protocol), SOAK_DISKFULL (3 per protocol),
# SOAK_DURATION (1h; 0 skips the long run), SOAK_CHURN (1m),
# SOAK_PROTOCOLS (randomwalk,dpsgd,pushsum), SOAK_SEED (logged and
# reported), SOAK_REPORT; SOAK_TIMEOUT (4h, go test's -timeout).
# A short check: make soak SOAK_KILLS=10 SOAK_DURATION=3m
SOAK_TIMEOUT ?= 4h
soak:
	$(GO) vet -tags soak ./cmd/gossipd
	$(GO) test -tags soak -run '^TestSoak$$' -count=1 -parallel 8 -timeout $(SOAK_TIMEOUT) -v ./cmd/gossipd

# The fleet benchmark (not part of make test): FLEET real daemons (150)
# on 127.0.0.1 in one job of partial views, Fashion-MNIST shards, then 30%
# killed at once; it logs connections per member, membership bytes per
# member per minute, time to FLEET_TARGET (0.75), isolated members and
# in-degrees. Knobs: FLEET, FLEET_DATASET, FLEET_TARGET, FLEET_SAMPLING,
# FLEET_DELTA, FLEET_LIMIT, FLEET_REPORT (cmd/gossipd/fleet_test.go).
fleet:
	$(GO) vet -tags fleet ./cmd/gossipd
	$(GO) test -tags fleet -run '^TestFleet$$' -count=1 -timeout 2h -v ./cmd/gossipd

# The ARM builds with $(ARMFLAGS), as make qemu's.
cross:
	CGO_ENABLED=0 GOOS=linux GOARCH=arm64 $(GO) build $(ARMFLAGS) -o /dev/null ./cmd/gossipd
	CGO_ENABLED=0 GOOS=linux GOARCH=arm GOARM=7 $(GO) build $(ARMFLAGS) -o /dev/null ./cmd/gossipd
	GOOS=linux GOARCH=amd64 $(GO) build -tags noasm -o /dev/null ./cmd/gossipd

# Benchmarks: Go micro-benchmarks, then gossipd against PyTorch in one run
# (needs python3-torch and dataset-fashion-mnist).
bench: build bench-go
	$(BIN) bench --torch $(REFERENCE)

bench-go:
	$(GO) test -run '^$$' -bench . -benchtime 1s ./model/...

clean:
	rm -rf bin
