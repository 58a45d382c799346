# tensorflow: a Keras training step at 2 ranks: plait.tensorflow, Horovod, MultiWorkerMirroredStrategy.
#
# TensorFlow training steps side by side at 2 ranks on this machine (bench/tf_bench.py): the
# same Keras 3 model (a ResNet-20-style CNN, 65 gradient tensors, batch 16 per rank), the same
# synthetic data and the same TensorFlow (2.21, tensorflow-cpu) under
#   plait-gloo     plait.tensorflow DistributedGradientTape, plaitrun, gloo
#   plait-ofi-shm  the same over libfabric's shm provider (PLAIT_TRANSPORT=ofi)
#   horovod        Horovod 0.28.1 DistributedGradientTape, horovodrun --gloo (built on first
#                  use into $PLAIT_CI_VENV_DIR/horovod-tf by ci/lib/horovod.sh tensorflow,
#                  with its local build fix for TF 2.21)
#   mwms           tf.distribute.MultiWorkerMirroredStrategy, CPU RING collectives, 2 worker
#                  processes started by tf_bench.py
#   local          2 independent processes, no allreduce: the floor
# Horovod gets HOROVOD_FUSION_THRESHOLD=64 MiB (plait's default) and its default cycle time,
# as in ci/bench horovod. The order of the contenders rotates each round. The table gives,
# per contender, the median time per step over all timed steps of all rounds (rank 0), p10 -
# p90, each round's median, and whether the ranks ended with identical weights; then plait's
# fusion statistics (plait.stats()).
#
# A contender that cannot run is never dropped silently: "ci/bench tensorflow: NOT MEASURED:
# <system>: <reason>" when it happens, again above the table, and a NOT MEASURED row in it.
# PLAIT_CI_NO_HOROVOD=<reason> forces that path for Horovod.
#
#   ci/bench tensorflow [--rounds N] [--out DIR] [-- tf_bench.py options]
#     default 2 rounds (3-6 minutes on 2 cores); results in OUT: tensorflow.jsonl and
#     tensorflow.md (--docs copies both)
#   e.g. ci/bench tensorflow --rounds 3 -- --steps 40 --batch 32
if [ $# -gt 0 ]; then [ "$1" = -- ] || bench_no_args "$@"; shift; fi
rounds="${rounds:-2}"
source ci/lib/python.sh
source ci/lib/tensorflow.sh
plait_ensure_packages

results="$out/tensorflow.jsonl"
rm -f "$results" "$out/tensorflow.md"
missing() { bench_missing "$results" "$@"; }

# TensorFlow for plait and MultiWorkerMirroredStrategy: the tf venv
# (ci/lib/tensorflow.sh), the one plait.tensorflow is tested with.
tf_python=""
tf_err="$(mktemp)"
if tf_python="$(plait_tf_python 2>"$tf_err")"; then
  cat "$tf_err" >&2
else
  cat "$tf_err" >&2
  tf_python=""
  for s in plait-gloo plait-ofi-shm mwms local; do
    missing "$s" "no TensorFlow venv: $(tail -1 "$tf_err" | sed 's/^ci: //')"
  done
fi
rm -f "$tf_err"

# plait, with its TensorFlow op library.
plait_ok=""
if [ -n "$tf_python" ]; then
  if ! log="$(cmake -S . -B build/bench-tf -G Ninja -DCMAKE_BUILD_TYPE=Release -DPLAIT_BUILD_TESTS=OFF \
        -DPLAIT_TF_PYTHON="$tf_python" 2>&1 && cmake --build build/bench-tf 2>&1)"; then
    printf '%s\n' "$log" >&2
    missing plait-gloo "the plait build failed (above)"
    missing plait-ofi-shm "the plait build failed (above)"
  elif ! PLAIT_LIBRARY="$PWD/build/bench-tf/lib/libplait.so" PYTHONPATH="$PWD/bindings/python" \
        TF_CPP_MIN_LOG_LEVEL=2 "$tf_python" -c "import plait.tensorflow" 2>"$out/import.err"; then
    for s in plait-gloo plait-ofi-shm; do
      missing "$s" "import plait.tensorflow fails: $(tail -1 "$out/import.err")"
    done
  else
    plait_ok=1
  fi
fi

# Horovod 0.28.1 for TensorFlow 2.21 (the first build takes about 10 minutes).
bench_horovod tensorflow
[ -n "$hvd_python" ] || missing horovod "$hvd_reason"

contenders=()
[ -n "$plait_ok" ] && contenders+=(plait-gloo plait-ofi-shm)
[ -n "$hvd_python" ] && contenders+=(horovod)
[ -n "$tf_python" ] && contenders+=(mwms local)
declare -A failed=()

run() {  # run SYSTEM ROUND [tf_bench.py options]
  local s="$1" r="$2" rc=0
  shift 2
  local common=(--json "$results" --round "$r" --label "$s" "$@")
  echo "== round $r of $rounds: $s (load average $(cut -d' ' -f1-3 /proc/loadavg))"
  case "$s" in
    plait-gloo|plait-ofi-shm)
      local t=(PLAIT_TRANSPORT=gloo)
      [ "$s" = plait-ofi-shm ] && t=(PLAIT_TRANSPORT=ofi FI_PROVIDER=shm)
      env "${t[@]}" PLAIT_LIBRARY="$PWD/build/bench-tf/lib/libplait.so" \
        PYTHONPATH="$PWD/bindings/python" TF_CPP_MIN_LOG_LEVEL=2 \
        timeout 600 build/bench-tf/bin/plaitrun -np 2 --no-prefix "$tf_python" bench/tf_bench.py \
        --impl plait "${common[@]}" || rc=$? ;;
    horovod)
      HOROVOD_FUSION_THRESHOLD=$((64 * 1024 * 1024)) TF_CPP_MIN_LOG_LEVEL=2 \
        timeout 600 "$(dirname "$hvd_python")/horovodrun" -np 2 -H localhost:2 --gloo \
        "$hvd_python" bench/tf_bench.py --impl horovod "${common[@]}" || rc=$? ;;
    mwms|local)
      TF_CPP_MIN_LOG_LEVEL=2 "$tf_python" bench/tf_bench.py --impl "$s" --launch 2 \
        "${common[@]}" || rc=$? ;;
  esac
  if [ "$rc" != 0 ]; then
    failed[$s]=1
    # tf_bench.py --launch writes its own missing row; the launchers do not.
    case "$s" in mwms|local) ;; *) missing "$s" "the run failed in round $r (exit $rc, output above)" ;; esac
  fi
}

echo "== load average before: $(cut -d' ' -f1-3 /proc/loadavg) ($(nproc) cores)"
n=${#contenders[@]}
for r in $(seq "$rounds"); do
  for k in $(seq 0 $((n - 1))); do
    s="${contenders[$(((k + r - 1) % n))]}"
    [ -n "${failed[$s]:-}" ] && continue
    run "$s" "$r" "$@"
  done
done

echo
echo "== TensorFlow training step, 2 ranks on $(hostname) ($(nproc) cores), load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
py="${tf_python:-python3}"
"$py" bench/tf_bench.py --report "$results" --markdown "$out/tensorflow.md" \
  --expect plait-gloo --expect plait-ofi-shm --expect horovod --expect mwms --expect local
echo "(per-run figures in $results, the table in $out/tensorflow.md)"
bench_docs "$results" "$out/tensorflow.md"
