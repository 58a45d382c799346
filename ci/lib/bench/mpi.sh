# mpi: goals 1 and 2, plait against Open MPI called from C and from Python (mpi4py).
#
# Two side-by-side runs, each in interleaved rounds at 2 and 3 ranks, plait over ofi/shm
# (what auto picks on one host), with the torch 2 venv (ci/lib/python.sh; mpi4py is
# installed into it on first use):
#   bench/latency_vs_mpi.sh  a lone cached 4 KiB allreduce: plait C (plait-bench latency)
#                            and plait.torch, cached epoch off and on, Open MPI from C
#                            (bench/mpi_allreduce.c) and from Python (bench/mpi4py_bench.py);
#                            then the ofi plugin alone, plait at 1 rank and the timelines'
#                            breakdown (goal 1);
#   bench/small_vs_mpi.sh    200 x 64 KiB per step: plait.torch through Horovod's script,
#                            Open MPI's nonblocking allreduces from C and from Python (goal 2).
# Their outputs in OUT/latency-vs-mpi.txt and OUT/small-vs-mpi.txt. The rules are
# bench/goal_table.py's: plait C against Open MPI from C, plait.torch against Open MPI from
# Python, the C figure beside it.
#
#   ci/bench mpi [--rounds N] [--docs]
#     default: 3 rounds of the lone allreduce (about 2 minutes) and 5 of the step (about
#              75 s); --rounds N: N of each
#     --docs: also copy them into bench/results/ as the next latency-vs-mpi-N.txt and
#             small-vs-mpi-N.txt (the goal table reads the highest N of each) and
#             regenerate the goal table
bench_no_args "$@"
source ci/lib/python.sh
plait_ensure_packages openmpi-bin libopenmpi-dev
bench_build build/bench
if ! torch_py="$(plait_torch2_python)"; then
  echo "ci/bench mpi: no torch 2 venv (above): plait.torch cannot be timed" >&2
  exit 1
fi
export PLAIT_TORCH_PYTHON="$torch_py"
bench_say "a lone 4 KiB allreduce: bench/latency_vs_mpi.sh, ${rounds:-3} rounds"
bench/latency_vs_mpi.sh build/bench "${rounds:-3}" > "$out/latency-vs-mpi.txt"
bench_say "200 x 64 KiB per step: bench/small_vs_mpi.sh, ${rounds:-5} rounds"
bench/small_vs_mpi.sh build/bench "${rounds:-5}" > "$out/small-vs-mpi.txt"
for f in latency-vs-mpi small-vs-mpi; do
  echo
  echo "$out/$f.txt:"
  grep '^|' "$out/$f.txt"
done
# The next free STEM-N.txt in bench/results/ (the bare STEM.txt counts as 1: its rerun is
# STEM-2.txt, as latency-vs-mpi's were named).
next_name() {
  local stem="$1" n=0 f k
  for f in "bench/results/$stem".txt "bench/results/$stem"-*.txt; do
    [ -e "$f" ] || continue
    k="${f#bench/results/$stem}"
    k="${k%.txt}"
    k="${k#-}"
    [[ "$k" =~ ^[0-9]*$ ]] || continue
    [ "${k:-1}" -ge "$n" ] && n=$((${k:-1} + 1))
  done
  [ "$n" = 0 ] && echo "$stem.txt" || echo "$stem-$n.txt"
}
bench_docs "$out/latency-vs-mpi.txt:$(next_name latency-vs-mpi)" \
  "$out/small-vs-mpi.txt:$(next_name small-vs-mpi)"
