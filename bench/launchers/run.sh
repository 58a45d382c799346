#!/usr/bin/env bash
# Launcher overhead (issue 34): the same 2-rank training step (step.py)
# started by plaitrun, Ray, Slurm and Spark, ROUNDS rounds interleaved
# (default 3), medians per engine. Prints each engine's start-up time (launch
# -> plait.init done on rank 0) and its step time against plaitrun's in the
# same run; engines that cannot run here print their reason and count as
# NOT MEASURED. Nothing fails on a duration: the machine's load moves them.
#
#   bench/launchers/run.sh BUILD_DIR [ROUNDS] [ENGINE...]
#
# Each engine is bench/launchers/<engine>.sh BUILD_DIR PYTHON: one JSON line
# {"engine", "hosts", "ranks", "startup_s", "step_ms_median"} on stdout, or
# exit 77 with the reason on stderr. PYTHON is the engine's venv
# (ci/lib/<engine>.sh) or /usr/bin/python3. Records go to
# $LAUNCHERS_JSON (default bench/results/launchers.jsonl), one per run.
# Every engine's ranks run with OMP_NUM_THREADS=1 unless the caller sets it:
# Ray and Spark give a task one thread, where torch under plaitrun or srun
# would take every core, and the step times would compare thread counts.
set -uo pipefail
export OMP_NUM_THREADS="${OMP_NUM_THREADS:-1}"
[ $# -ge 1 ] || { sed -n 2,14p "$0"; exit 2; }
BUILD=$(realpath "$1")
ROUNDS=${2:-3}
shift $(( $# >= 2 ? 2 : 1 ))
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
JSON=${LAUNCHERS_JSON:-$ROOT/bench/results/launchers.jsonl}
engines=("$@")
[ ${#engines[@]} -gt 0 ] || engines=(plaitrun ray slurm spark)
echo "launchers: ${engines[*]}, $ROUNDS rounds interleaved, on $(hostname) ($(nproc --all) cores," \
  "OMP_NUM_THREADS=$OMP_NUM_THREADS, load $(cut -d' ' -f1-3 /proc/loadavg))"
: > "$JSON.new"
declare -A why
for ((r = 1; r <= ROUNDS; r++)); do
  for e in "${engines[@]}"; do
    [ -n "${why[$e]:-}" ] && continue
    script="$HERE/$e.sh"
    if [ ! -x "$script" ]; then why[$e]="no bench/launchers/$e.sh"; continue; fi
    err=$(mktemp)
    out=$("$script" "$BUILD" "${LAUNCHER_PYTHON:-/usr/bin/python3}" 2>"$err")
    rc=$?
    if [ $rc -eq 77 ]; then
      why[$e]="$(tail -n 1 "$err")"
    elif [ $rc -ne 0 ] || [ -z "$out" ]; then
      echo "launchers: $e failed in round $r (exit $rc):"; tail -n 5 "$err"
      why[$e]="failed (exit $rc)"
    else
      echo "$out" | sed "s/}\$/, \"round\": $r}/" >> "$JSON.new"
    fi
    rm -f "$err"
  done
done
mv "$JSON.new" "$JSON"
python3 - "$JSON" "${engines[@]}" <<'PY'
import json, statistics, sys
path, engines = sys.argv[1], sys.argv[2:]
recs = [json.loads(l) for l in open(path) if l.strip()]
med = {}  # (engine, hosts): an engine's 2-host row apart from its 1-host one
for e in engines:
    for h in sorted({r.get("hosts", 1) for r in recs if r["engine"] == e}):
        rows = [r for r in recs if r["engine"] == e and r.get("hosts", 1) == h]
        med[e, h] = (statistics.median(r["startup_s"] for r in rows),
                     statistics.median(r["step_ms_median"] for r in rows), len(rows),
                     rows[0]["ranks"])
base = med.get(("plaitrun", 1))
# The load of a shared machine drifts between rounds: the ratio of the
# medians mixes rounds, the median of each round's own ratio (the engine's
# step over plaitrun's in the same round) does not.
base_round = {r["round"]: r["step_ms_median"] for r in recs
              if r["engine"] == "plaitrun" and r.get("hosts", 1) == 1}
print("%-10s %5s %6s %7s %12s %14s %s" % ("engine", "hosts", "ranks", "rounds", "start-up s",
                                          "step ms", "step vs plaitrun (1 host, 2 ranks): "
                                          "of the medians, median per round"))
for (e, h), (s, t, n, ranks) in med.items():
    paired = [r["step_ms_median"] / base_round[r["round"]] for r in recs
              if r["engine"] == e and r.get("hosts", 1) == h and r["round"] in base_round]
    ratio = "%.2fx, %.2fx" % (t / base[1], statistics.median(paired)) \
        if base and h == 1 and paired else "-"
    print("%-10s %5d %6d %7d %12.2f %14.2f %s" % (e, h, ranks, n, s, t, ratio))
PY
for e in "${engines[@]}"; do
  [ -n "${why[$e]:-}" ] && echo "launchers: $e NOT MEASURED: ${why[$e]}"
done
echo "launchers: records in $JSON"
