#!/usr/bin/env bash
# gpu-check.sh: issue 16's checks on a GPU machine without Go, in one go
# (docs/GPU.md, "On a GPU machine without Go"). Run from the repository
# root after `make gpu-bundle` here and carrying bin/gpudata, then bin/gpu,
# to the GPU machine. Each step's output goes to $OUT (or ./gpu-out).
set -uo pipefail
out=${OUT:-gpu-out}
mkdir -p "$out"
export GOSSIPD_DATA_DIR=${GOSSIPD_DATA_DIR:-$PWD/bin/gpudata}
bin=bin/gpu
status=0
step() { # step NAME COMMAND...: runs it, its output to $out/NAME.txt
	local name=$1
	shift
	echo "== $name: $*"
	"$@" > "$out/$name.txt" 2>&1
	local rc=$?
	if [ $rc -ne 0 ]; then
		echo "   FAILED (exit $rc): see $out/$name.txt"
		status=1
	fi
	tail -n 12 "$out/$name.txt"
}
time_v() { /usr/bin/time -v "$@" 2>&1 || return $?; }
step machine sh -c 'date -u; nvidia-smi; lscpu | grep -E "Model name|Flags" | cut -c1-200'
step devices "$bin/gossipd-cuda" devices
step conformance "$bin/cuda.test" -test.run 'TestCUDAConformance|TestNVRTC' -test.v
step train "$bin/gossipd-cuda" train --dataset fashion-mnist --model mlp --hidden 128 --epochs 1 --batch 32 --lr 0.1 --device cuda --quiet
step bench "$bin/gossipd-cuda" bench --what train --device cuda --batch 32,512 --against torch
step sim-gpu time_v "$bin/gossipd-cuda" simulate --dataset fashion-mnist --peers 10000 --rounds 20 --eval-every 20 --device cuda --quiet --out "$out/sim-gpu"
step sim-cpu time_v "$bin/gossipd-cuda" simulate --dataset fashion-mnist --peers 10000 --rounds 20 --eval-every 20 --device cpu --quiet --out "$out/sim-cpu"
# Batched gradients (D-PSGD): 1,000 peers on the GPU, then on the CPU.
step dpsgd-gpu time_v "$bin/gossipd-cuda" simulate --dataset fashion-mnist --protocol dpsgd --peers 1000 --rounds 20 --eval-every 20 --device cuda --quiet --out "$out/dpsgd-gpu"
step dpsgd-cpu time_v "$bin/gossipd-cuda" simulate --dataset fashion-mnist --protocol dpsgd --peers 1000 --rounds 20 --eval-every 20 --device cpu --quiet --out "$out/dpsgd-cpu"
exit $status
