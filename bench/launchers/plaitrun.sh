#!/usr/bin/env bash
# The launcher benchmark's plaitrun row (bench/launchers/run.sh): the step of
# step.py on NP ranks (default 2) started by plaitrun on this machine. Prints
# one JSON line: {"engine": "plaitrun", "hosts": 1, "ranks": NP,
# "startup_s": S, "step_ms_median": M}; exits 77 (with the reason) when it
# cannot run here.
#   bench/launchers/plaitrun.sh BUILD_DIR PYTHON [NP]
set -euo pipefail
[ $# -ge 2 ] || { sed -n 2,8p "$0"; exit 2; }
BUILD=$(realpath "$1") PY=$2 NP=${3:-2}
HERE=$(cd "$(dirname "$0")" && pwd)
t0=$(python3 -c 'import time; print(time.time())')
line=$("$BUILD/bin/plaitrun" -np "$NP" "$PY" "$HERE/step.py" | sed -n 's/^\[0\]: //p' |
  grep '"launcher_step"')
python3 - "$t0" "$line" "$NP" <<'PY'
import json, sys
t0, rec, np_ = float(sys.argv[1]), json.loads(sys.argv[2]), int(sys.argv[3])
print(json.dumps({"engine": "plaitrun", "hosts": 1, "ranks": np_,
                  "startup_s": round(rec["init_done"] - t0, 3),
                  "step_ms_median": round(rec["step_ms_median"], 3)}))
PY
