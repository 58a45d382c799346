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
#     again in interleaved rounds (bench/recheck.py); settling takes 100-400
#     steps, so each run has a cap in steps
#     and seconds (past it: "not settled within N steps"), and the costly
#     ones are NOT MEASURED with that reason unless PLAIT_CI_AUTOTUNE_ALL=1
#     (settled by default: every mix at 2 ranks over ofi/shm, uniform-64k and
#     mlp-10m at 2 ranks over gloo, uniform-64k at 3 ranks; --quick:
#     uniform-64k at 2 ranks); an autotune that is refused or fails is NOT
#     MEASURED with its reason;
#  5. comparison rounds, interleaved (the order rotates each round), at each
#     rank count: a lone 4 KiB allreduce (plait-bench latency per transport,
#     plait.torch, torch.distributed, Open MPI); 200 x 64 KiB float32
#     allreduces per step and one 64 MiB allreduce: plait (C, each transport
#     and the default, auto; 64 MiB in place), plait.torch (each transport), torch.distributed gloo
#     (blocking and async per tensor), Open MPI (blocking and nonblocking per
#     tensor), the transport plugins alone with memcpy (bench_transport), and
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
  libopenmpi-dev

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

# Which transports can start here, at every rank count.
transports=()
for t in gloo ofi:shm ofi:tcp; do
  name="${t%%:*}" prov="${t#*:}"
  [ "$prov" = "$t" ] && prov=""
  ok=1
  for n in "${ranks[@]}"; do
    if ! env PLAIT_TRANSPORT="$name" ${prov:+FI_PROVIDER=$prov} "$bin/plaitrun" -np "$n" \
        "$bin/plait-bench" allreduce --min 4K --max 4K --iters 1 --quiet >/dev/null \
        2>"$out/probe.err"; then
      why="transport $t cannot start here at $n ranks: $(tail -1 "$out/probe.err")"
      missing "plait-${t/:/-}" "$why"
      missing "plait.torch-${t/:/-}" "$why"
      ok=0
      break
    fi
  done
  [ "$ok" = 1 ] && transports+=("$t")
done
rm -f "$out/probe.err"
# plaitrun with one transport: run_plait gloo|ofi:shm RANKS ARGS...
run_plait() {
  local t="$1" n="$2" name="${1%%:*}" prov="${1#*:}"
  shift 2
  [ "$prov" = "$t" ] && prov=""
  env PLAIT_TRANSPORT="$name" ${prov:+FI_PROVIDER=$prov} "$bin/plaitrun" -np "$n" "$@"
}
label() { echo "${1/:/-}"; }
# The fusion study's file per transport and rank count (2 ranks: the names of before).
sweep_file() { echo "$out/fusion-$(label "$1")$([ "$2" = 2 ] || echo "-${2}ranks").jsonl"; }
mixes=(bench/mixes/resnet50.txt bench/mixes/bert-base.txt bench/mixes/mlp-10m.txt
       bench/mixes/uniform-64k.txt)
mix_args=()
for m in "${mixes[@]}"; do mix_args+=(--mix "$m"); done
sweep_transports=()  # shm is the ofi provider for one machine: no fusion study over tcp
for t in "${transports[@]}"; do [ "$t" = ofi:tcp ] || sweep_transports+=("$t"); done

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
for n in "${ranks[@]}"; do
  for t in "${sweep_transports[@]}"; do
    say "   plait over $t, $n ranks"
    run_plait "$t" "$n" "$bin/plait-bench" fusion "${mix_args[@]}" \
      --thresholds "$thresholds" --cycle-times "$([ "$n" = 2 ] && echo "$cycles2" || echo 1)" \
      --steps "$sweep_steps" --warmup 1 --label "$(label "$t")" --json "$(sweep_file "$t" "$n")" \
      | sed 's/^\[0\]: //'
  done
done

say "4. the job's own settings: defaults, and PLAIT_AUTOTUNE=1 settled"
# autotune_plan MIX RANKS TRANSPORT: "MAX_STEPS BUDGET_S TIMED_STEPS" for plait-bench fusion
# with PLAIT_AUTOTUNE=1 (a fresh tuner steps until it settles, at most MAX_STEPS steps or
# BUDGET_S seconds, then TIMED_STEPS are timed with its choice), or "- REASON" when the run
# is left out to bound ci/bench's time. Settling takes 100-400 steps (2 ranks, this machine):
# uniform-64k ~10 s over ofi/shm, ~25 s over gloo; mlp-10m ~25 s and ~45 s (measured);
# resnet50 ~45 s and ~2.5 min, bert-base ~3 min and ~7 min (the sweep's step times x 500);
# more at 3 ranks. The default run settles every mix at 2 ranks over ofi/shm (where the
# defaults lose most), the two light ones over gloo, and uniform-64k at 3 ranks: about
# 6-7 minutes, 13 at most (every run at its cap). PLAIT_CI_AUTOTUNE_ALL=1 runs them all.
autotune_plan() {
  local mix="$1" n="$2" t="$3" why="left out to bound ci/bench's time: settling $mix takes 100-400 steps, minutes here; PLAIT_CI_AUTOTUNE_ALL=1 measures it"
  if [ -n "${PLAIT_CI_AUTOTUNE_ALL:-}" ]; then echo "1000 900 5"; return; fi
  if [ "$quick" = 1 ]; then
    case "$mix:$n" in
      uniform-64k:2) echo "600 30 5" ;;
      *) echo "- --quick settles autotune on uniform-64k at 2 ranks only" ;;
    esac
    return
  fi
  case "$mix:$n:$t" in
    uniform-64k:*) echo "600 60 20" ;;
    mlp-10m:2:*) echo "600 90 10" ;;
    resnet50:2:ofi:shm) echo "600 120 5" ;;
    bert-base:2:ofi:shm) echo "600 240 3" ;;
    *) echo "- $why" ;;
  esac
}
# recheck TRANSPORT RANKS MIXFILE MIX STEPS: autotune's choice, the sweep's best and the
# defaults timed again side by side, recheck_rounds rounds in a rotating order
# (bench/recheck.py: the sweep ran minutes earlier, and the machine's speed moves by more
# than 10% in that time); bench/goals.py takes "autotune / best" from these rows.
recheck() {
  local t="$1" n="$2" m="$3" mix="$4" steps="$5" l pts r i k role thr mt cyc tmp
  l="$(label "$t")"
  if ! pts="$(python3 bench/recheck.py points --sweep "$(sweep_file "$t" "$n")" \
      --tuning "$tuning" --transport "$l" --ranks "$n" --mix "$mix")"; then
    echo "ci/bench all: autotune ($l, $n ranks, $mix): no interleaved recheck (above)" >&2
    return 0
  fi
  mapfile -t pts <<<"$pts"
  tmp="$out/recheck.tmp.jsonl"
  for ((r = 1; r <= recheck_rounds; r++)); do
    for ((i = 0; i < ${#pts[@]}; i++)); do
      k=$(((i + r - 1) % ${#pts[@]}))
      read -r role thr mt cyc <<<"${pts[$k]}"
      rm -f "$tmp"
      if [ "$role" = defaults ]; then
        set -- --job-settings
      else
        set -- --thresholds "$thr" --max-tensors "$mt" --cycle-times "$cyc"
      fi
      if run_plait "$t" "$n" "$bin/plait-bench" fusion --mix "$m" "$@" --steps "$steps" \
          --warmup 1 --label "$l" --json "$tmp" >/dev/null; then
        python3 bench/recheck.py tag --json "$tmp" --role "$role" --round "$r" >>"$tuning"
      else
        echo "ci/bench all: autotune recheck ($l, $n ranks, $mix): $role failed in round $r" >&2
      fi
    done
  done
  rm -f "$tmp"
  python3 - "$tuning" "$l" "$n" "$mix" <<'PY'
import json, statistics, sys
path, l, n, mix = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
got = {}
for line in open(path):
    r = json.loads(line)
    if r.get("kind") == "recheck" and (r["transport"], r["ranks"], r["mix"]) == (l, n, mix):
        got.setdefault(r["role"], []).append(r["step_s_median"] * 1e3)
print("   interleaved: " + ", ".join("%s %.2f ms" % (k, statistics.median(v))
                                    for k, v in sorted(got.items())))
PY
}
# 5 rounds: a launch's speed at 3 ranks on 2 cores varies by about 10% with where
# the scheduler puts its threads (four settings of uniform-64k, all alike since fused
# responses are no longer copied, read 5.63-6.22 ms over 3 launches each), as much as the
# goal's margin; with 3 rounds one lucky launch decided a verdict
recheck_rounds=$([ "$quick" = 1 ] && echo 2 || echo 5)
for n in "${ranks[@]}"; do
  for t in "${sweep_transports[@]}"; do
    l="$(label "$t")"
    say "   defaults over $t, $n ranks"
    run_plait "$t" "$n" "$bin/plait-bench" fusion --job-settings "${mix_args[@]}" \
      --steps "$defaults_steps" --warmup 1 --label "$l" --json "$tuning" | sed 's/^\[0\]: //'
    for m in "${mixes[@]}"; do
      mix="$(basename "$m" .txt)"
      read -r max budget steps <<<"$(autotune_plan "$mix" "$n" "$t")"
      if [ "$max" = - ]; then
        json "$tuning" kind=missing system=autotune transport="$l" ranks="$n" mix="$mix" \
          reason="$budget $steps"
        continue
      fi
      base="autotune-$l-${n}r-$mix"
      say "   PLAIT_AUTOTUNE=1 over $t, $n ranks, $mix: settle (<= $max steps, $budget s), $steps steps"
      if PLAIT_AUTOTUNE=1 PLAIT_AUTOTUNE_LOG="$out/$base.csv" PLAIT_LOG_LEVEL=info \
          run_plait "$t" "$n" "$bin/plait-bench" fusion --mix "$m" --settle-max "$max" \
          --settle-budget "$budget" --steps "$steps" --warmup 1 --label "$l" --json "$tuning" \
          >"$out/$base.out" 2>"$out/$base.log"; then
        sed 's/^\[0\]: //' "$out/$base.out" | tail -2
        json "$tuning" kind=autotune-run transport="$l" ranks="$n" mix="$mix" csv="$base.csv" \
          log="$base.log"
        recheck "$t" "$n" "$m" "$mix" "$((steps < 10 ? 10 : steps))"
      else
        rc=$?
        cat "$out/$base.out" "$out/$base.log" >&2
        # plait-bench's own words ("plait_init() failed: ...")
        why="$(grep -h 'plait-bench: ' "$out/$base.log" "$out/$base.out" | sed 's/^\[[0-9]*\]: //; s/^plait-bench: //' \
               | head -1)"
        reason="PLAIT_AUTOTUNE=1 over $t at $n ranks failed (exit $rc): ${why:-$(tail -1 "$out/$base.log")}"
        echo "ci/bench all: NOT MEASURED: autotune ($l, $n ranks): $reason" >&2
        json "$tuning" kind=missing system=autotune transport="$l" ranks="$n" reason="$reason"
        rm -f "$out/$base".*
        break  # the other mixes would fail the same way
      fi
      rm -f "$out/$base.out"
    done
  done
done

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
