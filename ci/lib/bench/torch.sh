# torch: plait.torch against torch.distributed (Gloo) and DDP, per interpreter.
#
# Side by side in one run per interpreter (bench/torch_bench.py, 2 ranks on this machine):
# (a) 200 x 64 KiB float32 allreduces, plait fused vs torch per tensor, blocking and async;
# (b) one 64 MiB allreduce; (c) a training step of a 10.5M-parameter MLP, plait
# DistributedOptimizer vs DDP vs one process. Rounds are interleaved; the table gives medians
# and ratios. The output is also kept in OUT/torch.txt.
#
#   ci/bench torch [--rounds N] [--python PY]... [-- torch_bench.py options]
#     --python PY: an interpreter to run it with, one run each (chooses the torch); default
#                  /usr/bin/python3 (Debian's python3-torch); --rounds N is torch_bench.py's
#   e.g. ci/bench torch --rounds 7 --python /usr/bin/python3 --python ~/venv-torch2/bin/python
pythons=()
while [ $# -gt 0 ]; do
  case "$1" in
    --python) pythons+=("${2:?ci/bench torch: --python needs an interpreter}"); shift 2 ;;
    --) shift; break ;;
    *) bench_no_args "$@" ;;
  esac
done
[ ${#pythons[@]} -eq 0 ] && pythons=(/usr/bin/python3)
[ -n "$rounds" ] && set -- --rounds "$rounds" "$@"
plait_ensure_packages python3-torch python3-numpy libopenblas0-pthread
bench_build build/bench
export PLAIT_LIBRARY="$PWD/build/bench/lib/libplait.so"
export PYTHONPATH="$PWD/bindings/python${PYTHONPATH:+:$PYTHONPATH}"
for py in "${pythons[@]}"; do
  echo "== bench/torch_bench.py --python $py $*"
  /usr/bin/python3 bench/torch_bench.py --python "$py" "$@"
done | tee "$out/torch.txt"
bench_docs "$out/torch.txt"
