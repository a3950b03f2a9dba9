#!/usr/bin/env bash
# Every GPU test and measurement in one command, for one call on a GPU machine.
#
#   experiments/gpu_all.sh OUT [--quick] [--only STEP,STEP...]
#
# Runs, one rank per GPU of this host (any number), with NVLink multicast off:
#   1. python3 -m pytest -m gpu tests/react/backends/test_gpu.py   (correctness, closed loop, failures)
#   2. torchrun benchmarks/bench_gpu.py                     (RCollective vs NCCL, timing on/off,
#                                                            pattern-switch cost)
#   3. experiments/gpu_closed_loop.py                        (closed loop at p = 0, 1, 2 copy
#                                                            streams, tuner cost, detection,
#                                                            Fig. 11 CDF), then again with the
#                                                            flow stamps taken after launch,
#                                                            then posted as CUDA graphs
#   4. experiments/table2_gpu.py                             (Table 2: dual tree, 100 MB)
#   5. experiments/gpu_graph_probe.py                        (one GPU: what a CUDA graph of the
#                                                            posting can capture)
# Each step's output goes to OUT/<step>.log and its files under OUT/<step>/; a failing step
# does not stop the others, nor does one past its time limit (it is stopped); the exit status
# is the number of failed steps. --quick runs every
# step small (a smoke test of the whole chain, about 2 minutes on 2 GPUs). --only runs the
# named steps (pytest bench loop loop_launch loop_graph table2 graph_probe) and no others.
# The full chain took 6 minutes on 2 H200s with its first four steps; with all seven it needs
# about 11, so on a machine lent for at most 10 minutes a command, run it as two calls:
#   experiments/gpu_all.sh OUT --only pytest,bench,loop,graph_probe      (~5 min)
#   experiments/gpu_all.sh OUT --only loop_launch,loop_graph,table2      (~6 min)
set -u
usage="usage: experiments/gpu_all.sh OUT [--quick] [--only STEP,STEP...]"
out=${1:?$usage}
shift
all_steps="pytest bench loop loop_launch loop_graph table2 graph_probe"
quick=""; only=""
while [ $# -gt 0 ]; do
  case $1 in
    --quick) quick=--quick ;;
    --only) [ $# -ge 2 ] || { echo "$usage" >&2; exit 2; }; only=${2//,/ }; shift ;;
    *) echo "unknown argument '$1'; $usage" >&2; exit 2 ;;
  esac
  shift
done
for s in $only; do
  case " $all_steps " in
    *" $s "*) ;;
    *) echo "unknown step '$s' in --only; the steps are: $all_steps" >&2; exit 2 ;;
  esac
done
cd "$(dirname "$0")/.."
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PYTHONUNBUFFERED=1 NCCL_DEBUG=${NCCL_DEBUG:-WARN}
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
mkdir -p "$out"
n=$(python3 -c 'import torch; print(torch.cuda.device_count())')
{
  echo "gpus: $n"; git rev-parse HEAD 2>/dev/null || true
  python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, "nccl", torch.cuda.nccl.version())'
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv 2>&1
  nvidia-smi topo -m 2>&1
} > "$out/env.txt"
bench=(); loop=(); table=()
if [ "$quick" = "--quick" ]; then
  bench=(--sizes 100000000 --reps 10 --loop-blocks 3 --switch-reps 6)
  loop=(--quick); table=(--quick)
fi
failed=0
step() {  # step NAME LIMIT_S COMMAND...: a step past its limit is stopped (and counts as failed)
  local name=$1 limit=$2; shift 2
  if [ -n "$only" ] && [[ " $only " != *" $name "* ]]; then return 0; fi
  echo "== $name: $*"
  local t0=$SECONDS
  timeout --kill-after=10 "$limit" "$@" > "$out/$name.log" 2>&1
  local rc=$?
  echo "== $name: exit $rc after $((SECONDS - t0)) s"
  tail -n 25 "$out/$name.log"
  [ $rc -eq 0 ] || failed=$((failed + 1))
}
step pytest 300 python3 -m pytest -q -m gpu -p no:cacheprovider -rs tests/react/backends/test_gpu.py
step bench 240 python3 -m torch.distributed.run --standalone --nproc-per-node="$n" \
     benchmarks/bench_gpu.py --out "$out/bench" "${bench[@]}"
step loop 600 python3 experiments/gpu_closed_loop.py --out "$out/loop" --timeout-s 30 "${loop[@]}"
step loop_launch 600 python3 experiments/gpu_closed_loop.py --stamp launch --out "$out/loop_launch" \
     --timeout-s 30 "${loop[@]}"
step loop_graph 600 python3 experiments/gpu_closed_loop.py --graph --out "$out/loop_graph" \
     --timeout-s 30 "${loop[@]}"
step table2 600 python3 experiments/table2_gpu.py --out "$out/table2" "${table[@]}"
step graph_probe 120 python3 experiments/gpu_graph_probe.py --out "$out/graph_probe"
echo "== failed steps: $failed"
exit $failed
