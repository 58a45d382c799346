# stack: goal 6, one 64 MiB allreduce through the whole stack against the plugin alone.
#
# The whole stack (plaitrun + plait-bench allreduce --in-place, float32 sum, 64 MiB) and the
# plugin alone (bench_transport: the plugin's ABI, no coordinator) over each transport, at
# each rank count, in interleaved rounds (the order alternates each round), with the same
# reduction kernels on both sides (util/reduce.c, linked into libplait and bench_transport
# alike: plait_kernels). The same commands as ci/bench all's comparison rounds, so the same
# records (OUT/comparison.jsonl); then goal 6's table (bench/goals.py --only d: PASS when
# the stack reaches 0.95x the plugin alone's bandwidth) in OUT/goals-stack.md.
#
#   ci/bench stack [--rounds N] [--ranks 2,3] [--transports gloo,ofi:shm,ofi:tcp] [--docs]
#     default: 5 rounds, 2 and 3 ranks, every transport (about 2-4 minutes on 2 cores)
#     --docs: also copy the records and the table into bench/results/ as
#             stack-vs-plugin.jsonl and goals-stack.md
ranks_list=2,3
transports_list=gloo,ofi:shm,ofi:tcp
while [ $# -gt 0 ]; do
  case "$1" in
    --ranks) ranks_list="${2:?ci/bench stack: --ranks needs a list, e.g. 2,3}"; shift 2 ;;
    --transports) transports_list="${2:?ci/bench stack: --transports needs a list}"; shift 2 ;;
    *) bench_no_args "$@" ;;
  esac
done
[[ "$ranks_list" =~ ^[2-9](,[2-9])*$ ]] || {
  echo "ci/bench stack: --ranks '$ranks_list' is not a list of rank counts 2-9 (e.g. 2,3)" >&2; exit 2; }
IFS=, read -r -a ranks <<<"$ranks_list"
IFS=, read -r -a transports <<<"$transports_list"
for t in "${transports[@]}"; do
  case "$t" in
    gloo|ofi:shm|ofi:tcp) ;;
    *) echo "ci/bench stack: --transports: '$t' is not gloo, ofi:shm or ofi:tcp" >&2; exit 2 ;;
  esac
done
rounds="${rounds:-5}"
plait_ensure_packages
bench_build build/bench
bin=build/bench/bin
cmp="$out/comparison.jsonl"
rm -f "$cmp"
label() { echo "${1/:/-}"; }
stack() {  # stack TRANSPORT RANKS: the whole stack, in place, as ci/bench all times it
  local t="$1" name="${1%%:*}" prov="${1#*:}"
  [ "$prov" = "$t" ] && prov=""
  env PLAIT_TRANSPORT="$name" ${prov:+FI_PROVIDER=$prov} "$bin/plaitrun" -np "$2" \
    "$bin/plait-bench" allreduce --min 64M --max 64M --iters 10 --in-place --no-check \
    --label "$(label "$t")" --json "$cmp" --quiet >/dev/null
}
plugin() {  # plugin RANKS: every transport alone and memcpy (exit 1: a "missing" record)
  local configs=() t
  for t in "${transports[@]}"; do
    [ "${t#*:}" = "$t" ] && configs+=("$t=$t") || configs+=("$(label "$t")=ofi,FI_PROVIDER=${t#*:}")
  done
  "$bin/bench_transport" -r 1 -n "$1" -s 64M:64M -j "$cmp" "${configs[@]}" >/dev/null || [ $? = 1 ]
}
for r in $(seq "$rounds"); do
  for n in "${ranks[@]}"; do
    bench_say "round $r of $rounds, $n ranks"
    if [ $((r % 2)) = 1 ]; then
      plugin "$n"
      for t in "${transports[@]}"; do stack "$t" "$n"; done
    else
      for t in "${transports[@]}"; do stack "$t" "$n"; done
      plugin "$n"
    fi
  done
done
for t in "${transports[@]}"; do  # said in table (d), never left blank
  bench_json "$cmp" kind=missing system="plait.torch-$(label "$t")" \
    reason="ci/bench stack times plait C only; ci/bench all times plait.torch too"
done
/usr/bin/python3 bench/goals.py --comparison "$cmp" --ranks "$ranks_list" --only d \
  --markdown "$out/goals-stack.md"
bench_docs "$cmp:stack-vs-plugin.jsonl" "$out/goals-stack.md"
