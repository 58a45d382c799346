# mxnet: MXNet training at 2 ranks: plait.mxnet, Horovod, kvstore dist_sync, one process.
#
# MXNet data-parallel training at 2 ranks on this machine: plait.mxnet (Gloo, libfabric shm)
# against Horovod 0.28.1's horovod.mxnet (Gloo) and MXNet's own parameter server (kvstore
# dist_sync), with kvstore 'local' in one process as the reference; one script
# (bench/mxnet_bench.py, whose docstring says what is measured and how), one run, the order
# rotating each round.
#
#  - plait: a Release build with the MXNet adapter in build/bench-mxnet, against the MXNet
#    venv of ci/lib/mxnet.sh ($PLAIT_CI_VENV_DIR/mxnet);
#  - Horovod: built on first use into $PLAIT_CI_VENV_DIR/horovod-mxnet (ci/lib/horovod.sh
#    mxnet, about 2 minutes on 2 cores; a failed build is remembered with its reason);
#  - the parameter server: a scheduler and one server process on 127.0.0.1, started and
#    stopped by bench/mxnet_bench.py.
# A contender that cannot run (Horovod not built, a transport that cannot start, a run that
# failed) is reported "NOT MEASURED: <contender>: <reason>" when it happens, again above the
# table, and as a row of it. PLAIT_CI_NO_HOROVOD=<reason> forces that path for Horovod.
#
#   ci/bench mxnet [--rounds N] [-- mxnet_bench.py options]    (default 3 rounds; about 5
#   minutes on 2 cores)
#   e.g. ci/bench mxnet --rounds 1 -- --contenders ps,local --steps 5
# Output: the table on stdout, and in OUT: mxnet.md (the table), mxnet.jsonl (one line per
# run), mxnet-runs.log (every process's output); --docs copies the first two.
if [ $# -gt 0 ]; then [ "$1" = -- ] || bench_no_args "$@"; shift; fi
rounds="${rounds:-3}"
source ci/lib/python.sh
source ci/lib/mxnet.sh
plait_ensure_packages python3-numpy "${PLAIT_MXNET_DEBIAN_PACKAGES[@]}"

rm -f "$out/mxnet.md" "$out/mxnet.jsonl" "$out/mxnet-runs.log"
args=(--rounds "$rounds" --json "$out/mxnet.jsonl" --markdown "$out/mxnet.md"
      --log "$out/mxnet-runs.log")

if ! mxnet_python="$(plait_mxnet_python)"; then
  echo "ci/bench mxnet: no MXNet venv (above); nothing can be measured" >&2
  exit 1
fi
args+=(--mxnet-python "$mxnet_python")

# plait, with its MXNet adapter.
build=build/bench-mxnet
if cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DPLAIT_BUILD_TESTS=OFF \
      -DPLAIT_MXNET_PYTHON="$mxnet_python" >"$build.log" 2>&1 \
    && nice -n 5 cmake --build "$build" -j 2 >>"$build.log" 2>&1 \
    && [ -e "$build/lib/libplait_mxnet.so" ]; then
  args+=(--plaitrun "$build/bin/plaitrun"
         --plait-env "PLAIT_LIBRARY=$PWD/$build/lib/libplait.so"
         --plait-env "PLAIT_PLUGIN_PATH=$PWD/$build/lib"
         --plait-env "PYTHONPATH=$PWD/bindings/python")
else
  reason="the build with the MXNet adapter failed: $(grep -m 1 -E 'error|Error' "$build.log" | cut -c 1-200) (log $build.log)"
  args+=(--not-measured "plait-gloo=$reason" --not-measured "plait-ofi-shm=$reason")
fi

# Horovod 0.28.1 with MXNet.
[ -n "${PLAIT_CI_NO_HOROVOD:-}" ] ||
  echo "== Horovod $PLAIT_HOROVOD_VERSION with MXNet (built on first use: about 2 minutes)"
bench_horovod mxnet
if [ -n "$hvd_python" ]; then
  args+=(--horovod-python "$hvd_python")
else
  args+=(--not-measured "horovod=$hvd_reason")
fi

echo "== $(date -u +%H:%M:%S) load average: $(cut -d ' ' -f 1-3 /proc/loadavg) ($(nproc) cores)"
/usr/bin/python3 bench/mxnet_bench.py "${args[@]}" "$@"
bench_docs "$out/mxnet.jsonl" "$out/mxnet.md"
