# tune: goal 5, autotune against the fusion sweep on every mix x transport row, at 2 and 3 ranks.
#
# The tuning part of ci/bench all alone (ci/lib/bench_tuning.sh, the same code):
# the fusion study (plait-bench fusion over fusion thresholds and cycle times on the
# ResNet-50, BERT-base, 10M-MLP and 200 x 64 KiB mixes, per transport and rank count), the
# mixes with the defaults (--job-settings), each mix with PLAIT_AUTOTUNE=1 stepped until it
# settles (its PLAIT_AUTOTUNE_LOG CSV and info log kept), then its choice, the sweep's best
# and the defaults timed again in interleaved rounds (bench/recheck.py). Every row is
# measured. Section (c) of the goal table (bench/goals.py --only c: within 10% of the best;
# settled = converged, a search stopped at its sample cap is a MISS; where the defaults are
# 1.15x or more off the best, autotune within 10% of it) in OUT/goals-tune.md.
#
#   ci/bench tune [--rounds N] [--ranks 2,3] [--transports gloo,ofi:shm] [--quick] [--docs]
#     default: 2 and 3 ranks, gloo and ofi/shm (about 15-25 minutes on 2 cores, more on a
#              busy machine); --rounds: recheck rounds (default 5; --quick 2)
#     --quick: a smaller sweep; autotune on uniform-64k only: to check the harness
#     --docs:  also copy them into bench/results/tune/: tuning.jsonl, fusion-*.jsonl (the
#              sweeps), autotune-*.csv and .log, and goals-tune.md
quick=0
ranks_list=2,3
transports_list=gloo,ofi:shm
while [ $# -gt 0 ]; do
  case "$1" in
    --ranks) ranks_list="${2:?ci/bench tune: --ranks needs a list, e.g. 2,3}"; shift 2 ;;
    --transports) transports_list="${2:?ci/bench tune: --transports needs a list, e.g. gloo,ofi:shm}"; shift 2 ;;
    --quick) quick=1; shift ;;
    *) bench_no_args "$@" ;;
  esac
done
[[ "$ranks_list" =~ ^[2-9](,[2-9])*$ ]] || {
  echo "ci/bench tune: --ranks '$ranks_list' is not a list of rank counts 2-9 (e.g. 2,3)" >&2; exit 2; }
[[ "$transports_list" =~ ^(gloo|ofi:shm)(,(gloo|ofi:shm))*$ ]] || {
  echo "ci/bench tune: --transports '$transports_list' is not a list of gloo and ofi:shm" >&2; exit 2; }
IFS=, read -r -a ranks <<<"$ranks_list"
IFS=, read -r -a wanted <<<"$transports_list"
if [ "$quick" = 1 ]; then
  thresholds=0,4M,64M; cycles2=1; sweep_steps=3; defaults_steps=5
else
  thresholds=0,1M,4M,16M,64M,256M; cycles2=1,5; sweep_steps=5; defaults_steps=10
fi
plait_ensure_packages
bench_build build/bench
bin=build/bench/bin
say() { bench_say "$@"; }
json() { bench_json "$@"; }
tuning="$out/tuning.jsonl"
rm -f "$out"/*.jsonl "$out"/*.md "$out"/autotune-*.csv "$out"/autotune-*.log
touch "$tuning"
source ci/lib/bench_tuning.sh
probe_failed() {  # a transport that cannot start: NOT MEASURED above the table
  echo "ci/bench tune: NOT MEASURED: autotune over $1: $2" >&2
  json "$tuning" kind=missing system=autotune transport="$(label "$1")" reason="$2"
}
probe_transports "${wanted[@]}"
say "fusion study"
tuning_sweep
say "the job's own settings: defaults, and PLAIT_AUTOTUNE=1 settled"
recheck_rounds="$rounds"  # empty: the default (5; 2 with --quick)
tuning_rows
sweeps=()
for f in "$out"/fusion-*.jsonl; do [ -e "$f" ] && sweeps+=(--sweep "$f"); done
: >"$out/empty.jsonl"
/usr/bin/python3 bench/goals.py --comparison "$out/empty.jsonl" --tuning "$tuning" \
  ${sweeps[@]+"${sweeps[@]}"} --ranks "$ranks_list" --only c --markdown "$out/goals-tune.md"
rm -f "$out/empty.jsonl"
# --docs: into bench/results/tune/, beside (not over) ci/bench all's snapshot, which other
# pages quote; the autotune-run rows name their CSV and log relative to tuning.jsonl
shopt -s nullglob
[ "$docs" = 1 ] && mkdir -p bench/results/tune
docs_files=()
for f in "$tuning" "$out"/fusion-*.jsonl "$out"/autotune-*.csv "$out"/autotune-*.log \
    "$out/goals-tune.md"; do
  docs_files+=("$f:tune/$(basename "$f")")
done
bench_docs "${docs_files[@]}"
