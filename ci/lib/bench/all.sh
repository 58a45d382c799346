# all: every measurement side by side at 2 and 3 ranks; tables, goals and plots.
#
# Every measurement, side by side on this machine, at 2 and 3 ranks
# (docs/performance.md shows and explains the figures):
#
#  1. memcpy bandwidth (the ceiling);
#  2. allreduce 4 KiB .. 256 MiB through plait on each transport available
#     (gloo, ofi/shm, ofi/tcp) and with Open MPI's MPI_Allreduce (2 ranks);
#  3. the fusion study: plait-bench fusion on the ResNet-50, BERT-base,
#     10M-MLP and 200 x 64 KiB gradient mixes, over fusion thresholds and
#     cycle times, in one launch per transport and rank count (cycle times
#     1 and 5 ms at 2 ranks, 1 ms at 3);
#  4. the same mixes with the job's own settings: the defaults (plait-bench
#     fusion --job-settings), and PLAIT_AUTOTUNE=1 (plait-bench fusion: a
#     fresh tuner per mix, stepped until it settles, then timed with its
#     choice; its PLAIT_AUTOTUNE_LOG CSV and info log kept beside the
#     results), then its choice, the sweep's best point and the defaults timed
#     again in interleaved rounds (bench/recheck.py); every mix x transport x
#     ranks row (settling takes about 100-180 steps; each run has a cap in
#     steps and seconds, past it: "not settled within N steps"; --quick:
#     uniform-64k only); an autotune that is refused or fails is NOT MEASURED
#     with its reason. Sections 3 and 4 are ci/lib/bench_tuning.sh,
#     which ci/bench tune runs alone;
#  5. comparison rounds, interleaved (the order rotates each round), at each
#     rank count: a lone 4 KiB allreduce (plait-bench latency per transport,
#     plait.torch, torch.distributed, Open MPI); 200 x 64 KiB float32
#     allreduces per step and one 64 MiB allreduce: plait (C, each transport
#     and the default, auto; 64 MiB in place), plait.torch (each transport), torch.distributed gloo
#     (blocking and async per tensor), Open MPI (blocking and nonblocking per
#     tensor, from C; and from Python, mpi4py: bench/mpi4py_bench.py, the
#     binding beside plait.torch), the transport plugins alone with memcpy (bench_transport), and
#     Horovod 0.28.1 when it builds here (ci/lib/horovod.sh torch);
#     a comparison that cannot run (Horovod not built, Open MPI missing, a
#     transport that cannot start, a torch.distributed run that failed) is
#     never dropped silently: "ci/bench all: NOT MEASURED: <system>: <reason>"
#     when it happens, again above the tables, and a NOT MEASURED row in each
#     table (bench/compare.py); PLAIT_CI_NO_HOROVOD=<reason> and
#     PLAIT_CI_NO_MPI=<reason> force that path for Horovod and Open MPI;
#  6. tables (medians over rounds, ratios against plait), the goals of issue
#     15 with a PASS/MISS column each (bench/goals.py; a MISS never fails the
#     run), JSON lines and PNG plots in OUT (default
#     build/bench-results/all).
#
#   ci/bench [all] [--rounds N] [--ranks 2,3] [--quick] [--docs] [--out DIR]
#     default: 3 rounds at 2 and 3 ranks (about 15-25 minutes on 2 cores; more on
#              a busy machine)
#     --quick: 1 round (unless --rounds), a smaller sweep, fewer steps (5-12 minutes): to
#              check the harness, not to quote
#     --docs:  also copy the JSON, tables and plots into bench/results/,
#              the snapshot docs/performance.md quotes, and regenerate issue 37's
#              goal table, docs/performance/goals.md, from it (as ci/bench goals)
quick=0
ranks_list=2,3
while [ $# -gt 0 ]; do
  case "$1" in
    --ranks) ranks_list="${2:?ci/bench all: --ranks needs a list, e.g. 2,3}"; shift 2 ;;
    --quick) quick=1; shift ;;
    *) bench_no_args "$@" ;;
  esac
done
[ -n "$rounds" ] || rounds=$([ "$quick" = 1 ] && echo 1 || echo 3)
[[ "$ranks_list" =~ ^[2-9](,[2-9])*$ ]] || {
  echo "ci/bench all: --ranks '$ranks_list' is not a list of rank counts 2-9 (e.g. 2,3)" >&2; exit 2; }
IFS=, read -r -a ranks <<<"$ranks_list"
if [ "$quick" = 1 ]; then
  thresholds=0,4M,64M; cycles2=1; sweep_steps=3; latency_iters=300; defaults_steps=5
else
  thresholds=0,1M,4M,16M,64M,256M; cycles2=1,5; sweep_steps=5; latency_iters=1000
  defaults_steps=10
fi
source ci/lib/python.sh
plait_ensure_packages "${PLAIT_PYTHON_DEBIAN_PACKAGES[@]}" python3-matplotlib openmpi-bin \
  libopenmpi-dev python3-mpi4py

rm -f "$out"/*.jsonl "$out"/*.png "$out"/*.md "$out"/autotune-*.csv "$out"/autotune-*.log
bench_build build/bench
bin=build/bench/bin
py=/usr/bin/python3
say() { bench_say "$@"; }
cmp="$out/comparison.jsonl"
tuning="$out/tuning.jsonl"
json() { bench_json "$@"; }
# missing SYSTEM REASON [RANKS]: a comparison left out, said now and in the tables.
missing() { bench_missing "$cmp" "$@"; }
mpirun_() { mpirun --allow-run-as-root --oversubscribe -np "$1" --bind-to none "${@:2}"; }
mpi=1
if [ -n "${PLAIT_CI_NO_MPI:-}" ]; then
  mpi=0; missing openmpi "$PLAIT_CI_NO_MPI (PLAIT_CI_NO_MPI)"
elif ! command -v mpicc >/dev/null || ! command -v mpirun >/dev/null; then
  mpi=0; missing openmpi "mpicc or mpirun not found (Debian: openmpi-bin, libopenmpi-dev)"
elif ! err="$(mpicc -O2 -o build/bench/mpi_allreduce bench/mpi_allreduce.c 2>&1)"; then
  mpi=0; missing openmpi "mpicc bench/mpi_allreduce.c failed: $(tail -1 <<<"$err")"
fi

source ci/lib/bench_tuning.sh
# A transport that cannot start is NOT MEASURED in the comparison tables.
probe_failed() { missing "plait-${1/:/-}" "$2"; missing "plait.torch-${1/:/-}" "$2"; }
probe_transports gloo ofi:shm ofi:tcp

say "1. memcpy (one thread)"
"$bin/plait-bench" memcpy --min 4K --max 256M --factor 4 --json "$out/bandwidth.jsonl"

say "2. allreduce 4 KiB .. 256 MiB, 2 ranks"
for t in "${transports[@]}"; do
  say "   plait over $t"
  run_plait "$t" 2 "$bin/plait-bench" allreduce --min 4K --max 256M --factor 4 \
    --label "$(label "$t")" --json "$out/bandwidth.jsonl" | sed 's/^\[0\]: //'
done
if [ "$mpi" = 1 ]; then
  say "   Open MPI MPI_Allreduce"
  if mpirun_ 2 build/bench/mpi_allreduce --min 4K --max 256M --factor 4 --steps 3 \
      --json "$out/bandwidth-mpi.jsonl"; then
    grep '"kind":"collective"' "$out/bandwidth-mpi.jsonl" >> "$out/bandwidth.jsonl"
  else
    mpi=0; missing openmpi "mpirun of bench/mpi_allreduce failed (exit $?, output above)"
  fi
  rm -f "$out/bandwidth-mpi.jsonl"
else
  say "   Open MPI MPI_Allreduce: NOT MEASURED (above)"
fi

say "3. fusion study"
tuning_sweep

say "4. the job's own settings: defaults, and PLAIT_AUTOTUNE=1 settled"
tuning_rows

say "5. comparison rounds at ${ranks[*]} ranks"
bench_horovod torch
if [ -n "$hvd_python" ]; then
  horovodrun="$(dirname "$hvd_python")/horovodrun"
else
  missing horovod "$hvd_reason"
fi
variants=(plait-c torch plugin)
expect=(--expect torch --expect plugin)
[ "$mpi" = 1 ] && variants+=(mpi) && expect+=(--expect openmpi)
# Open MPI from Python (mpi4py), the binding beside plait.torch, as issue 37's table measured it
if [ "$mpi" = 1 ] && "$py" -c 'import mpi4py' 2>/dev/null; then
  variants+=(mpi4py) && expect+=(--expect openmpi-mpi4py)
elif [ "$mpi" = 1 ]; then
  missing openmpi-mpi4py "$py cannot import mpi4py (Debian: python3-mpi4py)"
fi
# Horovod and plait.torch measured by the very same script (and torch).
# plait.torch runs it over gloo (as Horovod) and over ofi/shm.
[ -n "$hvd_python" ] && variants+=(horovod plait-hvdbench) && expect+=(--expect horovod)
torch_bench() {
  PLAIT_LIBRARY="$PWD/build/bench/lib/libplait.so" PYTHONPATH="$PWD/bindings/python" \
    "$py" bench/torch_bench.py --python "$py" --rounds 1 --lone-iters "$latency_iters" \
    --json "$cmp" "$@" >/dev/null
}
run_variant() {
  local n t name prov
  for n in "${ranks[@]}"; do
    case "$1" in
      plait-c)
        # auto: the default transport, which goal 4 holds to the best explicit one (table e)
        for t in auto "${transports[@]}"; do
          run_plait "$t" "$n" "$bin/plait-bench" fusion --mix uniform:200x64K --thresholds 64M \
            --steps 20 --warmup 3 --label "$(label "$t")" --json "$cmp" --quiet >/dev/null
          run_plait "$t" "$n" "$bin/plait-bench" allreduce --min 64M --max 64M --iters 10 \
            --in-place --no-check --label "$(label "$t")" --json "$cmp" --quiet >/dev/null
          run_plait "$t" "$n" "$bin/plait-bench" latency --iters "$latency_iters" \
            --label "$(label "$t")" --json "$cmp" --quiet >/dev/null
        done ;;
      torch)
        # torch.distributed once (gloo, its own); plait.torch over every transport
        for t in "${transports[@]}"; do
          name="${t%%:*}" prov="${t#*:}"
          [ "$prov" = "$t" ] && prov=""
          (
            export PLAIT_TRANSPORT="$name"
            if [ -n "$prov" ]; then export FI_PROVIDER="$prov"; else unset FI_PROVIDER; fi
            torch_bench --np "$n" --only abl --label "$(label "$t")" \
              $([ "$t" = "${transports[0]}" ] || echo --plait-only)
          )
        done ;;
      plugin)
        local configs=()
        for t in "${transports[@]}"; do
          prov="${t#*:}"
          [ "$prov" = "$t" ] && configs+=("$t=$t") || configs+=("$(label "$t")=ofi,FI_PROVIDER=$prov")
        done
        # exit 1: a configuration failed; its "missing" record is written
        "$bin/bench_transport" -r 1 -n "$n" -s 64M:64M -j "$cmp" "${configs[@]}" >/dev/null \
          || [ $? = 1 ] ;;
      mpi)
        mpirun_ "$n" build/bench/mpi_allreduce --min 64M --max 64M --steps 20 --json "$cmp.mpi" \
          >/dev/null
        mpirun_ "$n" build/bench/mpi_allreduce --latency --iters "$latency_iters" \
          --json "$cmp.mpi" >/dev/null
        cat "$cmp.mpi" >> "$cmp"
        rm -f "$cmp.mpi" ;;
      mpi4py)
        mpirun_ "$n" "$py" bench/mpi4py_bench.py --workloads latency,small \
          --iters "$latency_iters" --json "$cmp" >/dev/null ;;
      plait-hvdbench)
        for t in gloo ofi:shm; do
          [[ " ${transports[*]} " == *" $t "* ]] || continue
          run_plait "$t" "$n" "$py" bench/horovod_bench.py --impl plait --workloads fused,large \
            --json "$cmp" >/dev/null
        done ;;
      horovod)
        HOROVOD_FUSION_THRESHOLD=$((64 * 1024 * 1024)) "$horovodrun" -np "$n" -H "localhost:$n" \
          --gloo "$hvd_python" bench/horovod_bench.py --impl horovod --workloads fused,large \
          --json "$cmp" >/dev/null ;;
    esac
  done
}
nv=${#variants[@]}
left_out=()
for r in $(seq "$rounds"); do
  order=("${variants[@]:$(((r - 1) % nv))}" "${variants[@]:0:$(((r - 1) % nv))}")
  for v in "${order[@]}"; do
    [[ " ${left_out[*]:-} " == *" $v "* ]] && continue
    say "   round $r of $rounds: $v"
    # in the background so that set -e still stops it at its first failure
    run_variant "$v" 2>"$out/variant.err" &
    if wait $!; then rc=0; else rc=$?; fi
    if [ "$rc" != 0 ]; then
      cat "$out/variant.err" >&2
      case "$v" in
        plait-*) echo "ci/bench: $v failed (above)" >&2; exit 1 ;;
      esac
      system=$v
      [ "$v" = torch ] && system=torch.distributed
      [ "$v" = mpi ] && system=openmpi
      [ "$v" = mpi4py ] && system=openmpi-mpi4py
      why="its run failed in round $r (exit $rc: $(tail -1 "$out/variant.err")); left out of later rounds"
      missing "$system" "$why"
      # torch_bench also measures plait.torch, whose goals then say why they have no figure
      [ "$v" = torch ] && missing plait.torch-ofi-shm "torch_bench.py: $why"
      left_out+=("$v")
    fi
  done
done
rm -f "$out/variant.err"

say "6. tables, goals and plots"
"$py" bench/plot.py "$out/bandwidth.jsonl" --out-dir "$out/plots"
sweeps=()
for f in "$out"/fusion-*.jsonl; do
  [ -e "$f" ] || continue
  sweeps+=(--sweep "$f")
  "$py" bench/plot.py "$f" --out-dir "$out/plots/$(basename "$f" .jsonl)"
done
"$py" bench/compare.py "$cmp" "${expect[@]}" --ranks "$ranks_list" --markdown "$out/comparison.md"
touch "$tuning"
"$py" bench/goals.py --comparison "$cmp" --tuning "$tuning" "${sweeps[@]}" --ranks "$ranks_list" \
  --markdown "$out/goals.md"
if [ "$docs" = 1 ]; then
  d=bench/results
  mkdir -p "$d"
  cp "$out"/*.jsonl "$out/comparison.md" "$out/goals.md" "$out/plots/bandwidth.png" "$d/"
  for f in "$out"/autotune-*.csv "$out"/autotune-*.log; do [ -e "$f" ] && cp "$f" "$d/"; done
  for f in "$out"/fusion-*.jsonl; do
    t="$(basename "$f" .jsonl)"; t="${t#fusion-}"
    cp "$out/plots/fusion-$t/fusion-threshold.png" "$d/fusion-threshold-$t.png"
    cp "$out/plots/fusion-$t/breakdown.png" "$d/breakdown-$t.png"
  done
  bench_goal_table
  say "copied into $d; issue 37's goal table in docs/performance/goals.md"
fi
say "done: tables, goals, JSON lines and plots in $out"
