# Sourced by ci/bench before a suite: what the suites share. ci/bench has set suite (its
# name), rounds (empty: the suite's default), out (the results folder, made) and docs (1:
# copy the results into bench/results/).
source ci/lib/deps.sh
source ci/lib/horovod.sh

# bench_say TEXT: a progress line with the seconds since the suite started.
bench_started=$(date +%s)
bench_say() { echo "== [$(($(date +%s) - bench_started)) s] $*"; }

# bench_no_args ARGS...: the suite takes no options of its own.
bench_no_args() {
  [ $# -eq 0 ] && return 0
  echo "ci/bench $suite: unknown option '$1' (ci/bench $suite --help)" >&2
  exit 2
}

# bench_build DIR [CMAKE ARGS...]: a Release build of plait without tests in DIR; quiet
# unless it fails, then its output says why and the suite stops.
bench_build() {
  local dir="$1" log
  shift
  if ! log="$(cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=Release -DPLAIT_BUILD_TESTS=OFF \
        "$@" 2>&1 && cmake --build "$dir" 2>&1)"; then
    printf '%s\n' "$log" >&2
    echo "ci/bench $suite: the build in $dir failed (above)" >&2
    exit 1
  fi
}

# bench_json FILE KEY=VALUE...: appends one JSON object (values that are whole numbers stay
# numbers).
bench_json() {
  local file="$1"
  shift
  /usr/bin/python3 -c 'import json, sys
d = {}
for kv in sys.argv[1:]:
    k, v = kv.split("=", 1)
    d[k] = int(v) if v.isdigit() else v
print(json.dumps(d))' "$@" >>"$file"
}

# bench_missing FILE SYSTEM REASON [RANKS]: a comparison left out, said now and recorded in
# FILE as a {"kind": "missing"} row, which the suite's table shows as NOT MEASURED.
bench_missing() {
  echo "ci/bench $suite: NOT MEASURED: $2${4:+ ($4 ranks)}: $3" >&2
  bench_json "$1" kind=missing system="$2" reason="$3" ${4:+ranks=$4}
}

# bench_horovod FRAMEWORK: sets hvd_python to the python of Horovod's FRAMEWORK venv
# (ci/lib/horovod.sh; built on first use, minutes), or to "" with hvd_reason saying why not
# (PLAIT_CI_NO_HOROVOD=<reason> forces that). The build's progress shows on stderr.
bench_horovod() {
  hvd_python="" hvd_reason=""
  if [ -n "${PLAIT_CI_NO_HOROVOD:-}" ]; then
    hvd_reason="$PLAIT_CI_NO_HOROVOD (PLAIT_CI_NO_HOROVOD)"
    return 0
  fi
  local err rc=0
  err="$(mktemp)"
  # the build's progress shows as it comes (the first build takes minutes)
  plait_horovod_python "$1" >"$err.path" 2> >(tee "$err" >&2) || rc=$?
  wait $! 2>/dev/null || true
  if [ "$rc" = 0 ]; then
    hvd_python="$(cat "$err.path")"
  else
    hvd_reason="$(tail -1 "$err" | sed 's/^ci: //')"
  fi
  rm -f "$err.path"
  rm -f "$err"
}

# bench_docs FILE[:NAME]...: with --docs, copies each FILE of the results into bench/results/
# (as NAME when given), the snapshot docs/performance.md quotes.
bench_docs() {
  [ "$docs" = 1 ] || return 0
  local f
  mkdir -p bench/results
  for f in "$@"; do cp "${f%%:*}" "bench/results/$([[ "$f" == *:* ]] && echo "${f#*:}" || basename "$f")"; done
  bench_say "copied into bench/results: $(for f in "$@"; do [[ "$f" == *:* ]] && echo "${f#*:}" || basename "$f"; done | tr '\n' ' ')"
  bench_goal_table
}

# bench_goal_table: issue 37's goal table, judged from bench/results/, into
# docs/performance/goals.md (bench/goals.py --issue37; ci/bench goals runs this alone).
bench_goal_table() {
  mkdir -p docs/performance
  /usr/bin/python3 bench/goals.py --issue37 --results bench/results \
    --markdown docs/performance/goals.md
}
