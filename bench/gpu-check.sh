#!/usr/bin/env bash
# gpu-check.sh: issue 16's checks on a GPU machine without Go, in one go
# (docs/how-to/use-a-gpu.md, "On a GPU machine without Go"). Run from the repository
# root after `make gpu-bundle` here and carrying bin/gpu to the GPU
# machine. Every step's output goes to one log, $OUT/gpu-check.txt (or
# ./gpu-out/gpu-check.txt), written as the steps go, so that a run cut
# off by a time limit still brings back what it did; the simulations'
# outputs stay in a scratch folder and their summary.json goes to the log.
#
# Usage: bench/gpu-check.sh [STEP...]: the named steps only (machine,
# devices, warmup, conformance, onnxruntime, train, bench, bench-graphs, cnn-train, cnn-bench,
# cnn-bench-graphs, daemons, sim-gpu,
# sim-cpu, dpsgd-gpu, dpsgd-cpu, dpsgd-dp-gpu, dpsgd-dp-cpu, and issue
# 42's sim42-mlp-gpu, sim42-mlp-cpu, sim42-mlp-dpsgd-gpu,
# sim42-mlp-dpsgd-cpu, sim42-mlp-pushsum-gpu, sim42-mlp-pushsum-cpu,
# sim42-mlp-adpsgd-gpu, sim42-mlp-adpsgd-cpu, sim42-mlp-median-gpu,
# sim42-mlp-median-cpu, sim42-mlp-randk-gpu, sim42-mlp-randk-cpu,
# sim42-mlp-topk-gpu, sim42-mlp-topk-cpu, sim42-mlp-alie-gpu, sim42-mlp-alie-cpu,
# sim42-mlp-clipped-gpu, sim42-mlp-clipped-cpu,
# sim42-mlp-pushsum-clipped-gpu, sim42-mlp-pushsum-clipped-cpu, sim42-1m-gpu, sim42-1m-cpu, sim42-cnn-gpu,
# sim42-cnn-cpu, sim42-auto, sim42-auto-dpsgd, sim42-mlp-calls,
# sim42-mlp-dpsgd-calls, hostwork), to finish a run that was cut off; by default every step.
set -uo pipefail
only=" $* "
out=${OUT:-gpu-out}
mkdir -p "$out"
log=$out/gpu-check.txt
: > "$log"
bin=bin/gpu
for f in gossipd-cuda cuda.test onnx.test simulation.test; do
	if [ ! -x "$bin/$f" ]; then
		{ gzip -dc "$bin/$f.gz" > "$bin/$f" ||
			python3 -c 'import gzip, shutil, sys; shutil.copyfileobj(gzip.open(sys.argv[1]), open(sys.argv[2], "wb"))' "$bin/$f.gz" "$bin/$f"; } &&
			chmod +x "$bin/$f" || { echo "cannot unpack $bin/$f.gz (make gpu-bundle, and carry bin/gpu)"; exit 2; }
	fi
done
export GOSSIPD_DATA_DIR=${GOSSIPD_DATA_DIR:-$PWD/bin/gpu/data}
scratch=$(mktemp -d)
status=0
step() { # step NAME COMMAND...: runs it, its output appended to the log
	local name=$1
	shift
	if [ "$only" != "  " ] && [[ $only != *" $name "* ]]; then
		return 0
	fi
	echo "== $name: $*" | tee -a "$log"
	local start=$SECONDS
	"$@" > "$scratch/$name.txt" 2>&1
	local rc=$?
	cat "$scratch/$name.txt" >> "$log"
	echo "== $name: exit $rc after $((SECONDS - start)) s" | tee -a "$log"
	if [ $rc -ne 0 ]; then
		status=1
	fi
	tail -n 12 "$scratch/$name.txt"
}
time_v() { # wall time and peak memory: GNU time, or Python where it is missing
	if [ -x /usr/bin/time ]; then
		/usr/bin/time -v "$@" 2>&1 || return $?
	else
		python3 -c 'import resource, subprocess, sys, time
t = time.time()
rc = subprocess.call(sys.argv[1:])
print("Elapsed (wall clock) time (seconds): %.2f" % (time.time() - t))
print("Maximum resident set size (kbytes): %d" % resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
sys.exit(rc)' "$@" 2>&1 || return $?
	fi
}
sim() { # sim NAME ARGS...: a simulation, its summary.json into the output
	local name=$1
	shift
	time_v ${limit:+timeout "${SIM42_LIMIT:-$limit}"} "$bin/gossipd-cuda" simulate --dataset fashion-mnist --quiet --out "$scratch/$name" \
		${GPU_CHECK_PROFILE:+--cpuprofile "$out/$name.pprof"} "$@" || return $?
	# The summary without its per-peer lists (ε of each peer: 1,000 lines).
	python3 -c 'import json, sys
s = json.load(open(sys.argv[1]))
print(json.dumps({k: v for k, v in s.items() if not (isinstance(v, list) and len(v) > 20)}, indent=1))' "$scratch/$name/summary.json" ||
		cat "$scratch/$name/summary.json"
}
step machine sh -c 'date -u; nvidia-smi; lscpu | grep -E "Model name|Flags" | cut -c1-200
echo "python3: $(command -v python3)"; python3 -c "import sys, torch; print(sys.prefix, torch.__version__, torch.version.cuda)"
ldconfig -p | grep -E "libcuda\.so|libnvrtc\.so|libcublas\.so" | head
ls -d /usr/local/cuda*/lib64 2>/dev/null'
step devices "$bin/gossipd-cuda" devices
# A first small simulation writes the dataset's cache (about 1 s), so
# that the timed runs after it all read it.
step warmup "$bin/gossipd-cuda" simulate --dataset fashion-mnist --quiet --peers 10 --rounds 1 --device cpu --out "$scratch/warmup"
step conformance "$bin/cuda.test" -test.run 'TestCUDAConformance|TestNVRTC' -test.v
# Every exported model kind in onnxruntime against gossipd's predictions.
step onnxruntime "$bin/onnx.test" -test.run 'TestONNXRuntime' -test.v
step train "$bin/gossipd-cuda" train --dataset fashion-mnist --model mlp --hidden 128 --epochs 1 --batch 32 --lr 0.1 --device cuda --quiet
# PyTorch is the python3 on $PATH's (there, a virtual environment's; bench
# would take /usr/bin/python3).
step bench "$bin/gossipd-cuda" bench --what train --device cuda --batch 32,512 --against torch --seeds 5 --python "$(command -v python3)"
# PyTorch without its launch overhead: its steps replayed as CUDA graphs.
step bench-graphs "$bin/gossipd-cuda" bench --what train --device cuda --batch 32,512 --against torch-graphs --seeds 5 --python "$(command -v python3)"
# Convolutional networks on the GPU (issue 40): a LeNet-5 epoch, then
# both presets against PyTorch, eager and with CUDA graphs.
step cnn-train "$bin/gossipd-cuda" train --dataset fashion-mnist --model lenet5 --epochs 1 --batch 32 --lr 0.1 --device cuda --quiet
step cnn-bench "$bin/gossipd-cuda" bench --what train --device cuda --models lenet5,leaf-cnn --batch 32,512 --against torch --skip-purego --python "$(command -v python3)"
step cnn-bench-graphs "$bin/gossipd-cuda" bench --what train --device cuda --models lenet5,leaf-cnn --batch 32,512 --against torch-graphs --skip-purego --python "$(command -v python3)"
# Daemons training on the GPU: four real daemons on 127.0.0.1 (run
# --device cuda), each saying in /status where it trained.
step daemons "$bin/gossipd-cuda" demo --device cuda --peers 4 --target 0.85 --duration 90s --json --png "$scratch/demo.png"
step sim-gpu sim sim-gpu --peers 10000 --rounds 20 --eval-every 20 --device cuda
step sim-cpu sim sim-cpu --peers 10000 --rounds 20 --eval-every 20 --device cpu
# Batched gradients (D-PSGD): 1,000 peers on the GPU, then on the CPU.
step dpsgd-gpu sim dpsgd-gpu --protocol dpsgd --peers 1000 --rounds 20 --eval-every 20 --device cuda
step dpsgd-cpu sim dpsgd-cpu --protocol dpsgd --peers 1000 --rounds 20 --eval-every 20 --device cpu
# The same under DP-SGD: lots, clipping and noise batched on the GPU.
step dpsgd-dp-gpu sim dpsgd-dp-gpu --protocol dpsgd --peers 1000 --rounds 20 --eval-every 20 --dp-clip 1 --dp-noise 1 --device cuda
step dpsgd-dp-cpu sim dpsgd-dp-cpu --protocol dpsgd --peers 1000 --rounds 20 --eval-every 20 --dp-clip 1 --dp-noise 1 --device cpu
# The simulator on one GPU (issue 42): side by side with this machine's
# CPU cores, each bounded (SIM42_LIMIT seconds overrides the bounds) so
# that a slow one leaves time for the rest; GPU_CHECK_PROFILE=1 writes
# each simulation's CPU profile beside the log.
# 10,000 MLP peers by random walk and by D-PSGD; a million softmax peers
# (--partition sample:8) on the GPU, and on the CPU where it fits; LeNet-5
# peers in batches (before the million, the longest).
limit=240 step sim42-mlp-gpu sim sim42-mlp-gpu --model mlp --peers 10000 --rounds 20 --eval-every 20 --device cuda
limit=240 step sim42-mlp-cpu sim sim42-mlp-cpu --model mlp --peers 10000 --rounds 20 --eval-every 20 --device cpu
limit=240 step sim42-mlp-dpsgd-gpu sim sim42-mlp-dpsgd-gpu --model mlp --protocol dpsgd --peers 10000 --rounds 20 --eval-every 20 --device cuda
limit=240 step sim42-mlp-dpsgd-cpu sim sim42-mlp-dpsgd-cpu --model mlp --protocol dpsgd --peers 10000 --rounds 20 --eval-every 20 --device cpu
# The same peers by push-sum, whose mixes run on the device too.
limit=240 step sim42-mlp-pushsum-gpu sim sim42-mlp-pushsum-gpu --model mlp --protocol pushsum --peers 10000 --rounds 20 --eval-every 20 --device cuda
limit=240 step sim42-mlp-pushsum-cpu sim sim42-mlp-pushsum-cpu --model mlp --protocol pushsum --peers 10000 --rounds 20 --eval-every 20 --device cpu
# And by AD-PSGD, whose pairwise averages run on the device too.
limit=240 step sim42-mlp-adpsgd-gpu sim sim42-mlp-adpsgd-gpu --model mlp --protocol adpsgd --peers 10000 --rounds 20 --eval-every 20 --device cuda
limit=240 step sim42-mlp-adpsgd-cpu sim sim42-mlp-adpsgd-cpu --model mlp --protocol adpsgd --peers 10000 --rounds 20 --eval-every 20 --device cpu
# And by D-PSGD with the coordinate-wise median against a tenth of
# peers sending noise, whose robust mixes run on the device too.
limit=240 step sim42-mlp-median-gpu sim sim42-mlp-median-gpu --model mlp --protocol dpsgd --aggregator median --byzantine 0.1 --attack gaussian --peers 10000 --rounds 20 --eval-every 20 --device cuda
limit=240 step sim42-mlp-median-cpu sim sim42-mlp-median-cpu --model mlp --protocol dpsgd --aggregator median --byzantine 0.1 --attack gaussian --peers 10000 --rounds 20 --eval-every 20 --device cpu
# And by D-PSGD with CHOCO's rand-k steps, compressed on the device too.
limit=240 step sim42-mlp-randk-gpu sim sim42-mlp-randk-gpu --model mlp --protocol dpsgd --compression randk:0.1 --peers 10000 --rounds 20 --eval-every 20 --device cuda
limit=240 step sim42-mlp-randk-cpu sim sim42-mlp-randk-cpu --model mlp --protocol dpsgd --compression randk:0.1 --peers 10000 --rounds 20 --eval-every 20 --device cpu
# And with top-k's, cut on the device (TopKRows), their index bytes
# counted once made.
limit=240 step sim42-mlp-topk-gpu sim sim42-mlp-topk-gpu --model mlp --protocol dpsgd --compression topk:0.1 --peers 10000 --rounds 20 --eval-every 20 --device cuda
limit=240 step sim42-mlp-topk-cpu sim sim42-mlp-topk-cpu --model mlp --protocol dpsgd --compression topk:0.1 --peers 10000 --rounds 20 --eval-every 20 --device cpu
# And against a tenth of peers sending alie's μ − z·σ, the honest
# moments taken on the device once a period (MomentsRows).
limit=240 step sim42-mlp-alie-gpu sim sim42-mlp-alie-gpu --model mlp --protocol dpsgd --aggregator median --byzantine 0.1 --attack alie --peers 10000 --rounds 20 --eval-every 20 --device cuda
limit=240 step sim42-mlp-alie-cpu sim sim42-mlp-alie-cpu --model mlp --protocol dpsgd --aggregator median --byzantine 0.1 --attack alie --peers 10000 --rounds 20 --eval-every 20 --device cpu
# And by random walk and push-sum with clipped gossip, with no attackers,
# merged on the device too: 5,000
# peers, whose caches of 10 models each fit the arena (a quarter of the
# device).
limit=240 step sim42-mlp-clipped-gpu sim sim42-mlp-clipped-gpu --model mlp --aggregator clipped --peers 5000 --rounds 20 --eval-every 20 --device cuda
limit=240 step sim42-mlp-clipped-cpu sim sim42-mlp-clipped-cpu --model mlp --aggregator clipped --peers 5000 --rounds 20 --eval-every 20 --device cpu
limit=240 step sim42-mlp-pushsum-clipped-gpu sim sim42-mlp-pushsum-clipped-gpu --model mlp --protocol pushsum --aggregator clipped --peers 5000 --rounds 20 --eval-every 20 --device cuda
limit=240 step sim42-mlp-pushsum-clipped-cpu sim sim42-mlp-pushsum-clipped-cpu --model mlp --protocol pushsum --aggregator clipped --peers 5000 --rounds 20 --eval-every 20 --device cpu
limit=240 step sim42-cnn-gpu sim sim42-cnn-gpu --model lenet5 --peers 1000 --rounds 5 --eval-every 5 --peer-batch 256 --device cuda
limit=240 step sim42-cnn-cpu sim sim42-cnn-cpu --model lenet5 --peers 1000 --rounds 5 --eval-every 5 --device cpu
# --device auto on the random walk's 10,000 MLP peers: its summary says
# which device its trial of both chose, and the estimates.
limit=240 step sim42-auto sim sim42-auto --model mlp --peers 10000 --rounds 20 --eval-every 20 --device auto
# The same on D-PSGD's 10,000 MLP peers.
limit=240 step sim42-auto-dpsgd sim sim42-auto-dpsgd --model mlp --protocol dpsgd --peers 10000 --rounds 20 --eval-every 20 --device auto
# Where the GPU's time goes on the same peers: 5 rounds, each of the
# backend's calls timed apart (--device-profile: summary.json's
# device_time.calls; slower than the runs above, not to be compared).
limit=240 step sim42-mlp-calls sim sim42-mlp-calls --model mlp --peers 10000 --rounds 5 --eval-every 5 --device cuda --device-profile
limit=240 step sim42-mlp-dpsgd-calls sim sim42-mlp-dpsgd-calls --model mlp --protocol dpsgd --peers 10000 --rounds 5 --eval-every 5 --device cuda --device-profile
# The host's share of a simulation on a GPU, on this machine's CPU:
# BenchmarkHostWork (docs/explanation/gpu.md, "The host's share").
step hostwork sh -c "cd simulation 2>/dev/null || true; \"$PWD/$bin/simulation.test\" -test.run '^\$' -test.bench HostWork -test.benchtime 1x -test.count 3"
limit=300 step sim42-1m-gpu sim sim42-1m-gpu --peers 1000000 --partition sample:8 --rounds 2 --eval-every 2 --device cuda
limit=300 step sim42-1m-cpu sim sim42-1m-cpu --peers 1000000 --partition sample:8 --rounds 2 --eval-every 2 --device cpu
rm -rf "$scratch"
exit $status
