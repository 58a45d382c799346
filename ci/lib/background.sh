# Sourced by ci/test: setup steps that run in the background while the C
# builds run in the foreground (docs/testing.md, "The setup phase"). The
# framework venvs are mostly downloads and unpacking, and the Horovod build
# compiles with one job under nice -n 19, so on 2 cores both leave the CPU
# the builds need; one after the other they took minutes of a fresh run.
#
#   plait_bg_start GROUP 'SHELL TEXT'   # runs the text in the background, in a
#                                       # process group of its own (setsid bash)
#   plait_bg_step STEP COMMAND...       # (inside that text) COMMAND's stdout,
#                                       # stderr and status kept under STEP
#   plait_bg_wait GROUP                 # waits for the group
#   plait_bg_result STEP                # STEP's stderr replayed to stderr, its
#                                       # stdout printed, its status returned
#   plait_bg_stop                       # ends every group still running (EXIT)
#
# The text runs in a new bash at the checkout's root with ci/lib/background.sh
# sourced; it sources what else it needs. Each step's progress comes back
# when ci/test asks for its result, in ci/test's order, so the log reads as if
# the steps had run one after the other; ci/test asks only after the group
# ended, so a step never waits on the terminal.
CI_BG_DIR="${CI_BG_DIR:-}"
_plait_bg_groups=()

plait_bg_start() {
  local group="$1" text="$2"
  if [ -z "$CI_BG_DIR" ]; then
    CI_BG_DIR="$(mktemp -d)"
    export CI_BG_DIR
  fi
  setsid bash -c "source ci/lib/background.sh; $text" </dev/null \
    >"$CI_BG_DIR/$group.log" 2>&1 &
  echo "$!" >"$CI_BG_DIR/$group.pid"
  _plait_bg_groups+=("$group")
}

plait_bg_step() {
  local step="$1"
  shift
  local rc=0
  "$@" >"$CI_BG_DIR/$step.out" 2>"$CI_BG_DIR/$step.err" || rc=$?
  echo "$rc" >"$CI_BG_DIR/$step.rc"
}

plait_bg_wait() {
  local pid
  pid="$(cat "$CI_BG_DIR/$1.pid")"
  wait "$pid" 2>/dev/null || true
  # the group's own output: only what no step kept (a crash of the text itself)
  [ -s "$CI_BG_DIR/$1.log" ] && sed "s/^/ci: background $1: /" "$CI_BG_DIR/$1.log" >&2
  return 0
}

plait_bg_result() {
  local step="$1"
  if [ ! -f "$CI_BG_DIR/$step.rc" ]; then
    echo "ci: the background step $step did not finish (its group ended without it)" >&2
    return 1
  fi
  cat "$CI_BG_DIR/$step.err" >&2
  cat "$CI_BG_DIR/$step.out"
  return "$(cat "$CI_BG_DIR/$step.rc")"
}

# Ends the groups still running (ci/test's EXIT trap: a failed build must not
# leave pip or a compiler running behind it), then removes the folder.
plait_bg_stop() {
  local group pid
  [ -n "$CI_BG_DIR" ] || return 0
  for group in "${_plait_bg_groups[@]}"; do
    pid="$(cat "$CI_BG_DIR/$group.pid" 2>/dev/null)" || continue
    if kill -0 "$pid" 2>/dev/null; then
      echo "ci: stopping the background setup ($group, process group $pid)" >&2
      kill -TERM -- "-$pid" 2>/dev/null || true
    fi
  done
  rm -rf "$CI_BG_DIR"
}
