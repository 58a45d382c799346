# Sourced by ci/lib/bench/all.sh and ci/lib/bench/tune.sh: the fusion study (a sweep of
# fusion thresholds and cycle times per gradient mix) and, per mix, the defaults, a settled
# PLAIT_AUTOTUNE=1 run and the interleaved recheck of autotune's choice against the sweep's
# best (goal (c) of bench/goals.py; issue 37, goal 5). The suite has set bin, out, quick
# (1: --quick), ranks (array), thresholds, cycles2 (cycle times swept at 2 ranks),
# sweep_steps, defaults_steps, tuning (the tuning JSON lines) and, if it wants, recheck_rounds
# (default 5; 2 with --quick); say and json are bench_say and bench_json.

# probe_transports T...: sets transports to those of T (gloo, ofi:shm, ofi:tcp) that start
# here at every rank count, and sweep_transports to those of them the fusion study runs
# (shm is the ofi provider for one machine: no study over tcp); for each one that cannot
# start, calls the suite's probe_failed T REASON.
probe_transports() {
  local t name prov n ok
  transports=() sweep_transports=()
  for t in "$@"; do
    name="${t%%:*}" prov="${t#*:}"
    [ "$prov" = "$t" ] && prov=""
    ok=1
    for n in "${ranks[@]}"; do
      if ! env PLAIT_TRANSPORT="$name" ${prov:+FI_PROVIDER=$prov} "$bin/plaitrun" -np "$n" \
          "$bin/plait-bench" allreduce --min 4K --max 4K --iters 1 --quiet >/dev/null \
          2>"$out/probe.err"; then
        probe_failed "$t" "transport $t cannot start here at $n ranks: $(tail -1 "$out/probe.err")"
        ok=0
        break
      fi
    done
    [ "$ok" = 1 ] && transports+=("$t")
    [ "$ok" = 1 ] && [ "$t" != ofi:tcp ] && sweep_transports+=("$t")
  done
  rm -f "$out/probe.err"
}
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

# tuning_sweep: the fusion study, one launch per transport and rank count (sweep_file).
tuning_sweep() {
  local n t
  for n in "${ranks[@]}"; do
    for t in "${sweep_transports[@]}"; do
      say "   plait over $t, $n ranks"
      run_plait "$t" "$n" "$bin/plait-bench" fusion "${mix_args[@]}" \
        --thresholds "$thresholds" --cycle-times "$([ "$n" = 2 ] && echo "$cycles2" || echo 1)" \
        --steps "$sweep_steps" --warmup 1 --label "$(label "$t")" --json "$(sweep_file "$t" "$n")" \
        | sed 's/^\[0\]: //'
    done
  done
}

# autotune_plan MIX: "MAX_STEPS BUDGET_S TIMED_STEPS RECHECK_STEPS STEPS_PER_SAMPLE" for
# plait-bench fusion with PLAIT_AUTOTUNE=1 (a fresh tuner steps until it settles, at most
# MAX_STEPS steps or BUDGET_S seconds, then TIMED_STEPS are timed with its choice, and
# RECHECK_STEPS in each recheck round), or "- REASON" when the run is left out (--quick).
# Every mix x transport x ranks row is measured (issue 37, goal 5): since 2026-12-06 the
# search converges in 25-60 samples (3 training steps each; 1 for the two heavy mixes,
# whose steps of 25-700 ms are long samples already: Horovod's
# HOROVOD_AUTOTUNE_STEPS_PER_SAMPLE, which plait honours), so a row costs about 100-180
# steps: seconds for uniform-64k and mlp-10m, ResNet-50 and BERT 0.5-2 minutes at 3 ranks.
autotune_plan() {
  if [ "$quick" = 1 ]; then
    case "$1" in
      uniform-64k) echo "400 30 5 5 3" ;;
      *) echo "- --quick settles autotune on uniform-64k only" ;;
    esac
    return
  fi
  case "$1" in
    uniform-64k) echo "400 60 20 20 3" ;;
    mlp-10m) echo "400 90 10 10 3" ;;
    resnet50) echo "300 150 5 5 1" ;;
    *) echo "300 240 3 3 1" ;;
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
    echo "ci/bench $suite: autotune ($l, $n ranks, $mix): no interleaved recheck (above)" >&2
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
        echo "ci/bench $suite: autotune recheck ($l, $n ranks, $mix): $role failed in round $r" >&2
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
# tuning_rows: at each rank count and over each transport of the study, every mix with
# the defaults, then settled with PLAIT_AUTOTUNE=1 (its CSV and info log kept in out as
# autotune-<transport>-<n>r-<mix>.{csv,log}), then rechecked side by side.
tuning_rows() {
  local n t l m mix max budget steps rsteps sps base rc why reason
  # 5 rounds: a launch's speed at 3 ranks on 2 cores varies by about 10% with where
  # the scheduler puts its threads (four settings of uniform-64k, all alike since fused
  # responses are no longer copied, read 5.63-6.22 ms over 3 launches each), as much as the
  # goal's margin; with 3 rounds one lucky launch decided a verdict
  recheck_rounds="${recheck_rounds:-$([ "$quick" = 1 ] && echo 2 || echo 5)}"
  for n in "${ranks[@]}"; do
    for t in "${sweep_transports[@]}"; do
      l="$(label "$t")"
      say "   defaults over $t, $n ranks"
      run_plait "$t" "$n" "$bin/plait-bench" fusion --job-settings "${mix_args[@]}" \
        --steps "$defaults_steps" --warmup 1 --label "$l" --json "$tuning" | sed 's/^\[0\]: //'
      for m in "${mixes[@]}"; do
        mix="$(basename "$m" .txt)"
        read -r max budget steps rsteps sps <<<"$(autotune_plan "$mix")"
        if [ "$max" = - ]; then
          json "$tuning" kind=missing system=autotune transport="$l" ranks="$n" mix="$mix" \
            reason="$budget $steps $rsteps $sps"
          continue
        fi
        base="autotune-$l-${n}r-$mix"
        say "   PLAIT_AUTOTUNE=1 over $t, $n ranks, $mix: settle (<= $max steps, $budget s), $steps steps"
        if PLAIT_AUTOTUNE=1 PLAIT_AUTOTUNE_LOG="$out/$base.csv" PLAIT_LOG_LEVEL=info \
            PLAIT_AUTOTUNE_STEPS_PER_SAMPLE="$sps" \
            run_plait "$t" "$n" "$bin/plait-bench" fusion --mix "$m" --settle-max "$max" \
            --settle-budget "$budget" --steps "$steps" --warmup 1 --label "$l" --json "$tuning" \
            >"$out/$base.out" 2>"$out/$base.log"; then
          sed 's/^\[0\]: //' "$out/$base.out" | tail -2
          json "$tuning" kind=autotune-run transport="$l" ranks="$n" mix="$mix" csv="$base.csv" \
            log="$base.log"
          recheck "$t" "$n" "$m" "$mix" "$rsteps"
        else
          rc=$?
          cat "$out/$base.out" "$out/$base.log" >&2
          # plait-bench's own words ("plait_init() failed: ...")
          why="$(grep -h 'plait-bench: ' "$out/$base.log" "$out/$base.out" | sed 's/^\[[0-9]*\]: //; s/^plait-bench: //' \
                 | head -1)"
          reason="PLAIT_AUTOTUNE=1 over $t at $n ranks failed (exit $rc): ${why:-$(tail -1 "$out/$base.log")}"
          echo "ci/bench $suite: NOT MEASURED: autotune ($l, $n ranks): $reason" >&2
          json "$tuning" kind=missing system=autotune transport="$l" ranks="$n" reason="$reason"
          rm -f "$out/$base".*
          break  # the other mixes would fail the same way
        fi
        rm -f "$out/$base.out"
      done
    done
  done
}
