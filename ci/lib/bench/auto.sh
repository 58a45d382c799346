# auto: goal 4, the default transport (auto) against each explicit one, at 2 and 3 ranks.
#
# plait C with PLAIT_TRANSPORT unset (auto: label "auto"), gloo, ofi/shm, ofi/tcp, ofi/shm
# again under another label ("ofi-shm-again": the same settings as "ofi-shm", so the tables
# show how far apart two identical launches come in this run, the noise a verdict must
# beat), and ofi/shm with PLAIT_OFI_YIELD_US=2000 (the progress loop as it was before it
# looked at ranks per CPU: label "ofi-shm-yield2000"), on the workloads the goals time from
# C: the 200 x 64 KiB
# step (plait-bench fusion, 64M threshold), a lone 4 KiB allreduce (plait-bench latency) and
# 64 MiB in place, at each rank count (3 ranks on 2 cores: oversubscribed), in interleaved
# rounds (the order rotates each round, and runs backwards every second round, so that no
# configuration always follows the same one: a launch can be slowed by what the one
# before it left, e.g. memory to reclaim). Records in OUT/comparison.jsonl, the tables
# (bench/compare.py) in OUT/comparison.md, goal 4's table (bench/goals.py --only e: PASS
# when auto is within 5% of the best explicit transport) in OUT/goals-auto.md.
#
#   ci/bench auto [--rounds N] [--ranks 2,3] [--docs]
#     default: 3 rounds, 2 and 3 ranks (about 6-12 minutes on 2 cores)
#     --docs: also copy them into bench/results/ as auto-vs-explicit.jsonl,
#             auto-vs-explicit.md and goals-auto.md
ranks_list=2,3
while [ $# -gt 0 ]; do
  case "$1" in
    --ranks) ranks_list="${2:?ci/bench auto: --ranks needs a list, e.g. 2,3}"; shift 2 ;;
    *) bench_no_args "$@" ;;
  esac
done
[[ "$ranks_list" =~ ^[2-9](,[2-9])*$ ]] || {
  echo "ci/bench auto: --ranks '$ranks_list' is not a list of rank counts 2-9 (e.g. 2,3)" >&2; exit 2; }
IFS=, read -r -a ranks <<<"$ranks_list"
rounds="${rounds:-3}"
plait_ensure_packages
bench_build build/bench
bin=build/bench/bin
cmp="$out/comparison.jsonl"
rm -f "$cmp"
# LABEL=settings (space-separated VAR=value; auto: PLAIT_TRANSPORT left unset)
configs=("auto=" "gloo=PLAIT_TRANSPORT=gloo" "ofi-shm=PLAIT_TRANSPORT=ofi FI_PROVIDER=shm"
         "ofi-tcp=PLAIT_TRANSPORT=ofi FI_PROVIDER=tcp"
         "ofi-shm-again=PLAIT_TRANSPORT=ofi FI_PROVIDER=shm"
         "ofi-shm-yield2000=PLAIT_TRANSPORT=ofi FI_PROVIDER=shm PLAIT_OFI_YIELD_US=2000")
measure() {  # measure LABEL=SETTINGS RANKS: the three workloads, as ci/bench all times them
  local l="${1%%=*}" n="$2" settings
  read -r -a settings <<<"${1#*=}"
  local run=(env -u PLAIT_TRANSPORT -u FI_PROVIDER -u PLAIT_OFI_YIELD_US ${settings[@]+"${settings[@]}"}
             "$bin/plaitrun" -np "$n" "$bin/plait-bench")
  "${run[@]}" fusion --mix uniform:200x64K --thresholds 64M --steps 20 --warmup 3 --label "$l" \
    --json "$cmp" --quiet >/dev/null &&
  "${run[@]}" latency --iters 1000 --label "$l" --json "$cmp" --quiet >/dev/null &&
  "${run[@]}" allreduce --min 64M --max 64M --iters 10 --in-place --no-check --label "$l" \
    --json "$cmp" --quiet >/dev/null ||
  bench_missing "$cmp" "plait-$l" "its run failed in a round (exit $?)" "$n"
}
nc=${#configs[@]}
for r in $(seq "$rounds"); do
  for n in "${ranks[@]}"; do
    bench_say "round $r of $rounds, $n ranks"
    for ((i = 0; i < nc; i++)); do  # odd rounds forwards, even rounds backwards
      k=$(((r % 2 ? i : nc - 1 - i) + r - 1))
      measure "${configs[$((k % nc))]}" "$n"
    done
  done
done
/usr/bin/python3 bench/compare.py "$cmp" --ranks "$ranks_list" --markdown "$out/comparison.md" \
  >/dev/null
/usr/bin/python3 bench/goals.py --comparison "$cmp" --ranks "$ranks_list" --only e \
  --markdown "$out/goals-auto.md"
bench_docs "$cmp:auto-vs-explicit.jsonl" "$out/comparison.md:auto-vs-explicit.md" \
  "$out/goals-auto.md"
