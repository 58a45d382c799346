# frameworks: goal 8: the same small CNN in PyTorch, TensorFlow and MXNet under plait, Horovod, each one's own distribution, and one process.
#
# The seed study's comparison, reproduced on this machine (bench/frameworks.py, whose
# docstring says what is measured and how; the network is bench/frameworks_models.py's
# SPEC, built layer by layer by each framework): conv 3x3x32, conv 3x3x64, max-pool,
# dense 128, dense 10 on 28x28x1 synthetic images, batch 32 per rank, SGD, one thread per
# process, trained per framework by
#   plait-gloo, plait-ofi   plait's binding under plaitrun (gloo; libfabric shm)
#   horovod                 Horovod 0.28.1's binding, the same code, horovodrun --gloo
#   native                  DDP (gloo) / MultiWorkerMirroredStrategy (RING) / kvstore
#                           dist_sync (a parameter server on 127.0.0.1)
#   single                  one process, the reference of the scaling efficiency
# with the pythons plait is tested with: Debian's python3 (torch 1.13, the torch Horovod is
# built against), the tf venv (ci/lib/tensorflow.sh) and the mxnet venv (ci/lib/mxnet.sh);
# plait from one Release build with the TensorFlow op library and the MXNet adapter
# (build/bench-frameworks); Horovod from ci/lib/horovod.sh (each framework's venv is built
# on first use: torch ~8, tensorflow ~10, mxnet ~2 minutes on a quiet machine).
# A run that cannot happen is never dropped: "NOT MEASURED: FW SYSTEM: REASON" when it
# happens, above the tables and as a row. PLAIT_CI_NO_HOROVOD=<reason> leaves Horovod out
# for every framework, PLAIT_CI_NO_HOROVOD_TORCH / _TENSORFLOW / _MXNET=<reason> for one.
#
#   ci/bench frameworks [--rounds N] [--quick] [--frameworks LIST] [--systems LIST]
#                       [--ranks N] [--out DIR] [--docs] [-- frameworks.py options]
#     default: 3 rounds (--quick: 1), every framework and system, 2 ranks, 20 timed steps
#     (+5 warm-up) per run; about 10-20 minutes on 2 loaded cores once everything is built
#   e.g. ci/bench frameworks --quick --frameworks torch,mxnet --systems native,single
# Output in OUT: frameworks.md (the tables), frameworks.jsonl (one line per run),
# frameworks.png (step time and scaling efficiency per framework and system),
# frameworks-runs.log (every process's output); --docs copies the first three.
fw_list=torch,tensorflow,mxnet
sys_list=plait-gloo,plait-ofi,horovod,native,single
fw_ranks=2
fw_rounds_default=3
while [ $# -gt 0 ]; do
  case "$1" in
    --quick) fw_rounds_default=1; shift ;;
    --frameworks) fw_list="${2:?ci/bench frameworks: --frameworks needs a list (torch,tensorflow,mxnet)}"; shift 2 ;;
    --systems) sys_list="${2:?ci/bench frameworks: --systems needs a list}"; shift 2 ;;
    --ranks) fw_ranks="${2:?ci/bench frameworks: --ranks needs a count >= 2}"; shift 2 ;;
    --) shift; break ;;
    *) bench_no_args "$@" ;;
  esac
done
rounds="${rounds:-$fw_rounds_default}"
# Bad input is named before anything is built (frameworks.py checks the same, exit 2).
for f in ${fw_list//,/ }; do
  [[ " torch tensorflow mxnet " == *" $f "* ]] || {
    echo "ci/bench frameworks: --frameworks: unknown '$f' (choose from torch,tensorflow,mxnet)" >&2; exit 2; }
done
for s in ${sys_list//,/ }; do
  [[ " plait-gloo plait-ofi horovod native single " == *" $s "* ]] || {
    echo "ci/bench frameworks: --systems: unknown '$s' (choose from plait-gloo,plait-ofi,horovod,native,single)" >&2; exit 2; }
done
[[ "$fw_ranks" =~ ^[1-9][0-9]*$ ]] && [ "$fw_ranks" -ge 2 ] || {
  echo "ci/bench frameworks: --ranks '$fw_ranks' is not a rank count >= 2" >&2; exit 2; }

source ci/lib/python.sh
source ci/lib/tensorflow.sh
source ci/lib/mxnet.sh
plait_ensure_packages python3-torch python3-numpy python3-matplotlib libopenblas0-pthread \
  "${PLAIT_MXNET_DEBIAN_PACKAGES[@]}"
rm -f "$out"/frameworks.{md,jsonl,png} "$out/frameworks-runs.log"
args=(--frameworks "$fw_list" --systems "$sys_list" --ranks "$fw_ranks" --rounds "$rounds"
      --out "$out" --python torch=/usr/bin/python3)
nm() { args+=(--not-measured "$1=$2"); }

# fw_venv FW FUNCTION VAR: VAR set to the python of FW's venv (FUNCTION prints it), or
# left empty with every row of FW NOT MEASURED, the venv's reason given.
fw_venv() {
  local err py s
  err="$(mktemp)"
  if py="$("$2" 2>"$err")"; then
    cat "$err" >&2
    args+=(--python "$1=$py")
    printf -v "$3" '%s' "$py"
  else
    cat "$err" >&2
    for s in ${sys_list//,/ }; do nm "$1:$s" "no $1 venv: $(tail -1 "$err" | sed 's/^ci: //')"; done
  fi
  rm -f "$err"
}
tf_python="" mxnet_python=""
[[ ",$fw_list," == *,tensorflow,* ]] && fw_venv tensorflow plait_tf_python tf_python
[[ ",$fw_list," == *,mxnet,* ]] && fw_venv mxnet plait_mxnet_python mxnet_python

# plait: one Release build with the TensorFlow op library and the MXNet adapter.
build=build/bench-frameworks
if [[ ",$sys_list," == *,plait-* ]]; then
  bench_say "building plait in $build"
  launcher=()
  command -v ccache >/dev/null && launcher=(-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
  bench_build "$build" ${launcher[@]+"${launcher[@]}"} ${tf_python:+-DPLAIT_TF_PYTHON="$tf_python"} \
    ${mxnet_python:+-DPLAIT_MXNET_PYTHON="$mxnet_python"}
  args+=(--plaitrun "$PWD/$build/bin/plaitrun" --plait-env "PLAIT_LIBRARY=$PWD/$build/lib/libplait.so"
         --plait-env "PLAIT_PLUGIN_PATH=$PWD/$build/lib" --plait-env "PYTHONPATH=$PWD/bindings/python")
  for f in ${fw_list//,/ }; do
    py=/usr/bin/python3 mod=plait.torch
    [ "$f" = tensorflow ] && py="$tf_python" mod=plait.tensorflow
    [ "$f" = mxnet ] && py="$mxnet_python" mod=plait.mxnet
    [ -n "$py" ] || continue
    if ! err="$(PLAIT_LIBRARY="$PWD/$build/lib/libplait.so" PLAIT_PLUGIN_PATH="$PWD/$build/lib" \
          PYTHONPATH="$PWD/bindings/python" TF_CPP_MIN_LOG_LEVEL=2 "$py" -c "import $mod" 2>&1)"; then
      for s in plait-gloo plait-ofi; do nm "$f:$s" "import $mod fails: $(tail -1 <<<"$err")"; done
    fi
  done
fi

# Horovod 0.28.1, one venv per framework.
if [[ ",$sys_list," == *,horovod,* ]]; then
  for f in ${fw_list//,/ }; do
    var="PLAIT_CI_NO_HOROVOD_${f^^}"
    if [ -n "${!var:-}" ]; then
      nm "$f:horovod" "${!var} ($var)"
      continue
    fi
    bench_say "Horovod $PLAIT_HOROVOD_VERSION for $f (built on first use)"
    bench_horovod "$f"
    if [ -n "$hvd_python" ]; then args+=(--horovod-python "$f=$hvd_python")
    else nm "$f:horovod" "$hvd_reason"; fi
  done
fi

bench_say "$(date -u +%H:%M:%S) load average: $(cut -d ' ' -f 1-3 /proc/loadavg) ($(nproc) cores)"
rc=0
/usr/bin/python3 bench/frameworks.py "${args[@]}" "$@" || rc=$?
bench_docs "$out/frameworks.jsonl" "$out/frameworks.md" "$out/frameworks.png"
exit "$rc"
