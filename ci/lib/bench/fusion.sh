# fusion: the coordinator issue's benchmark: 200 x 64 KiB at 2 ranks over Gloo, fusion on/off, cache off.
#
# 200 x 64 KiB float32 allreduces per batch at 2 ranks over Gloo (PLAIT_TRANSPORT=gloo:
# auto would pick ofi), with the default fusion
# threshold and with fusion off (PLAIT_FUSION_THRESHOLD=0), and with the response cache off
# (PLAIT_CACHE_CAPACITY=0) to show the control cost; runs interleaved (A B C A B C ...) so
# machine noise hits all alike. Then one 64 MiB allreduce for the transport's bandwidth
# through plait. The output is also kept in OUT/fusion.txt (--docs: bench/results/bench-fusion.txt).
#
#   ci/bench fusion [--rounds N]        (default 3)
bench_no_args "$@"
plait_ensure_packages
bench_build build/bench
rounds="${rounds:-3}"
# fusion_run VAR=VALUE... -- FUSION ARGS...: one 2-rank launch of bench/fusion over Gloo.
fusion_run() {
  local vars=()
  while [ "$1" != -- ]; do vars+=("$1"); shift; done
  env PLAIT_TRANSPORT=gloo "${vars[@]}" build/bench/bin/plaitrun -np 2 --no-prefix \
    build/bench/bin/fusion "${@:2}"
}
run() { fusion_run "$@" -- -k 200 -s 65536 -n 20 -w 5; }
{
  for r in $(seq "$rounds"); do
    echo "== round $r of $rounds"
    run PLAIT_FUSION_THRESHOLD=64M
    run PLAIT_FUSION_THRESHOLD=0
    run PLAIT_FUSION_THRESHOLD=64M PLAIT_CACHE_CAPACITY=0
  done
  echo "== one 64 MiB float32 allreduce (transport bandwidth through plait)"
  fusion_run -- -k 1 -s 67108864 -n 10 -w 2
} | tee "$out/fusion.txt"
bench_docs "$out/fusion.txt:bench-fusion.txt"
