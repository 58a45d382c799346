#!/usr/bin/env bash
# plait under a real Slurm (Debian's slurm-wlm and munge), started by this
# script for one scenario (ci/lib/slurm.sh), no launcher of ours unless said:
#
#   one-srun     one node: srun -n2 python examples/torch_train.py trains, ends identical
#   one-sbatch   one node: sbatch examples/slurm_train.sbatch completes (its secret file)
#   one-salloc   one node: salloc -n2 plaitrun -np 2 ... starts the ranks with srun;
#                the secret reaches them on srun's stdin; a rank's exit status comes back
#   one-fault    one node: kill -9 of task 1 fails task 0 within PLAIT_TIMEOUT_S + 5 s,
#                naming rank 1; no process of the job left
#   one-bad      one node: a secret file others can read -> plait's error naming it;
#                too few CPUs (srun --immediate -n8) -> Slurm's error; plaitrun -np 4 in
#                salloc -n2 -> plaitrun's naming the slots; srun with no slurmctld -> srun's
#                own error, nothing of plait's
#   two-srun     two hosts (network namespaces h1, h2): srun -N2 -n4 torch_train ends identical,
#                and the layout plait reads from srun's variables is right
#   two-salloc   two hosts: salloc -N2 -n4 plaitrun -np 4 (no -H) places 2 ranks per host with srun
#   two-fault    two hosts: scancel --signal=KILL of rank 3's srun step (plaitrun in salloc):
#                plaitrun names rank 3 and ends the job within PLAIT_TIMEOUT_S + 5 s; nothing left
#   two-elastic  two hosts: salloc -N2 -n4 plaitrun --min-np 2 --max-np 4 with a discovery
#                script listing the allocation's nodes (scontrol show hostnames) runs
#                examples/elastic_torch.py, every worker an srun step; both of h2's steps
#                are killed (scancel --signal=KILL) mid-job: the job re-forms on h1's 2
#                workers within 2 x PLAIT_TIMEOUT_S + 2 s, ends with status 0, every rank's
#                parameters equal to a run without plait; no step, no process left
#
#   tests/tools/slurm/run.sh SCENARIO     (root; exits 77 with the reason where it cannot run)
# Environment: PLAITRUN, HOST_WORKER, PLAIT_LIBRARY, PLAIT_PLUGIN_PATH (ctest sets them),
# PLAIT_SLURM_PYTHON (default /usr/bin/python3, with torch).
set -euo pipefail
scenario="${1:?usage: run.sh SCENARIO}"
here="$(cd "$(dirname "$0")" && pwd)"
src="$(cd "$here/../../.." && pwd)"
# shellcheck source=ci/lib/slurm.sh
. "$src/ci/lib/slurm.sh"
skip() { echo "SKIP: $*"; exit 77; }
die() { echo "FAIL: $*"; exit 1; }
slurm_require
py="${PLAIT_SLURM_PYTHON:-/usr/bin/python3}"
case "$scenario" in
*-srun | one-sbatch | one-salloc | two-elastic)
  "$py" -c 'import torch' 2>/dev/null || skip "$py cannot import torch (python3-torch)" ;;
esac
for v in PLAITRUN HOST_WORKER PLAIT_LIBRARY PLAIT_PLUGIN_PATH; do
  [ -n "${!v:-}" ] || die "$v is not set (ctest sets it: tests/CMakeLists.txt)"
done
export PYTHONPATH="$src/bindings/python${PYTHONPATH:+:$PYTHONPATH}" PYTHONDONTWRITEBYTECODE=1
export PLAIT_TRANSPORT=gloo OMP_NUM_THREADS=1 PLAIT_START_TIMEOUT_S=60
unset PLAIT_SECRET PLAIT_SECRET_FILE PLAIT_RENDEZVOUS PLAIT_RANK PLAIT_SIZE
cd "$src"

cleanup() {
  slurm_stop
  [ -n "${out:-}" ] && rm -rf "$out"
  if declare -F hosts_cleanup >/dev/null; then hosts_cleanup; fi
}
out="$(mktemp -d /tmp/plait-slurm-test-XXXXXX)"
trap cleanup EXIT
trap 'exit 130' INT TERM

secret_file() { # a private secret file: its path
  (umask 077 && od -An -N32 -tx1 /dev/urandom | tr -d ' \n' >"$out/secret" && echo >>"$out/secret")
  echo "$out/secret"
}

# The job's processes still running (their environment names this cluster's conf).
leftovers() {
  local p
  for p in $(pgrep -f "$1" 2>/dev/null); do
    grep -qs "$slurm_dir" "/proc/$p/environ" && ps -o pid=,args= -p "$p"
  done
  return 0
}

# After a kill at t0 of rank $4: waits for the launcher (pid $1) to end, then
# checks that rank 0's first line $2 ("FAILED <time> <error>", a regex) came
# within PLAIT_TIMEOUT_S + 5 = 10 s naming rank $4, and that nothing of the job
# is left. Sets took, line, rc (the launcher's status).
expect_failed_naming() {
  local pid="$1" pattern="$2" t0="$3" lost="$4"
  timeout 60 sh -c "while kill -0 $pid 2>/dev/null; do sleep 0.1; done" ||
    die "the launcher still runs 60 s after rank $lost was killed"
  rc=0
  wait "$pid" || rc=$?
  line="$(grep -m1 "$pattern" "$out/log")" || { cat "$out/log"; die "rank 0 did not fail"; }
  took="$(echo "$line" | awk -v t0="$t0" '{ printf "%.1f", $3 - t0 }')"
  awk -v t="$took" 'BEGIN { exit !(t <= 10) }' ||
    die "rank 0 failed $took s after the kill (bound: PLAIT_TIMEOUT_S + 5 = 10 s)"
  echo "$line" | grep -q "rank $lost" || die "rank 0's error does not name rank $lost: $line"
  sleep 1
  local left
  left="$(leftovers "$HOST_WORKER loop")"
  [ -z "$left" ] || die "processes of the job left: $left"
}

expect_trained() { # output file, ranks
  grep -q "parameters identical on all $2 ranks" "$1" || { tail -30 "$1"; die "no 'parameters identical on all $2 ranks'"; }
  grep -q "loss went down" "$1" || { tail -30 "$1"; die "the loss did not go down"; }
}

case "$scenario" in
one-srun)
  slurm_start_one
  PLAIT_SECRET_FILE="$(secret_file)" timeout 300 srun -n2 "$py" examples/torch_train.py \
    --epochs 2 >"$out/log" 2>&1 || { tail -30 "$out/log"; die "srun -n2 torch_train.py failed"; }
  expect_trained "$out/log" 2
  echo "PASS: srun -n2 python examples/torch_train.py: $(grep -m1 'parameters identical' "$out/log")"
  ;;
one-sbatch)
  slurm_start_one
  mkdir -p "$out/home"
  id="$(HOME="$out/home" PLAIT_PYTHON="$py" sbatch --parsable --output="$out/job-%j.out" \
    examples/slurm_train.sbatch --epochs 2)" || die "sbatch refused the job"
  state="$(slurm_wait_job "$id" 300)" || { cat "$out"/job-*.out; die "job $id did not end in 300 s: $state"; }
  [ "$state" = COMPLETED ] || { cat "$out"/job-*.out; die "job $id ended $state"; }
  expect_trained "$out/job-$id.out" 2
  [ -z "$(ls -A "$out/home/.plait")" ] || die "the job's secret file was left in \$HOME/.plait"
  echo "PASS: sbatch examples/slurm_train.sbatch: job $id COMPLETED, parameters identical"
  ;;
one-salloc)
  slurm_start_one
  timeout 300 salloc -n2 "$PLAITRUN" -np 2 "$py" examples/torch_train.py --epochs 2 >"$out/log" 2>&1 ||
    { tail -30 "$out/log"; die "salloc -n2 plaitrun -np 2 torch_train.py failed"; }
  grep -q "starting the ranks with .*srun, not ssh, on localhost:2" "$out/log" ||
    { head "$out/log"; die "plaitrun did not say it starts the ranks with srun"; }
  expect_trained "$out/log" 2
  # each rank in a step of its own (srun), with the 64-digit secret read from srun's stdin,
  # and the first failing rank's status is plaitrun's
  set +e
  t0=$SECONDS
  timeout 120 salloc -n2 "$PLAITRUN" --grace 2 -np 2 sh -c 'echo "rank $PLAIT_RANK step ${SLURM_STEP_ID:-none} secret ${#PLAIT_SECRET}"; [ $PLAIT_RANK = 0 ] && sleep 2 && exit 3; exec sleep 86$PLAIT_RANK' >"$out/log2" 2>&1
  rc=$?
  took=$((SECONDS - t0))
  set -e
  # rank 1 (sleep 861) was stopped through srun: its stdin ended, the wrapper ended it
  [ "$took" -lt 60 ] || die "plaitrun took $took s to stop rank 1 through srun"
  sleep 1
  left="$(leftovers "sleep 861")"
  [ -z "$left" ] || die "rank 1 left running after plaitrun stopped: $left"
  grep -q '^\[0\]: rank 0 step [0-9][0-9]* secret 64$' "$out/log2" || { cat "$out/log2"; die "rank 0 not in an srun step with the secret"; }
  grep -q '^\[1\]: rank 1 step [0-9][0-9]* secret 64$' "$out/log2" || { cat "$out/log2"; die "rank 1 not in an srun step with the secret"; }
  [ "$rc" = 3 ] || { cat "$out/log2"; die "plaitrun exited $rc, not rank 0's 3"; }
  grep -q "rank 0 (on localhost, over srun) exited with status 3" "$out/log2" || { cat "$out/log2"; die "the failing rank is not named"; }
  echo "PASS: salloc plaitrun: ranks started with srun, trained identical; exit status 3 of rank 0 returned, rank 1 stopped through srun in ${took} s in all, nothing left"
  ;;
one-fault)
  slurm_start_one
  PLAIT_SECRET_FILE="$(secret_file)" PLAIT_TIMEOUT_S=5 srun -l -n2 "$HOST_WORKER" loop \
    >"$out/log" 2>&1 &
  srun_pid=$!
  for _ in $(seq 1 600); do [ "$(grep -c ': ready$' "$out/log" 2>/dev/null)" = 2 ] && break; sleep 0.1; done
  [ "$(grep -c ': ready$' "$out/log")" = 2 ] || { cat "$out/log"; die "the job never got ready"; }
  victim=""
  for p in $(pgrep -f "$HOST_WORKER loop"); do
    grep -qs "$slurm_dir" "/proc/$p/environ" && tr '\0' '\n' <"/proc/$p/environ" | grep -qx SLURM_PROCID=1 && victim=$p
  done
  [ -n "$victim" ] || die "task 1's process not found"
  t0="$(date +%s.%N)"
  kill -9 "$victim"
  expect_failed_naming "$srun_pid" '^0: FAILED' "$t0" 1
  echo "PASS: task 1 killed: task 0 failed in $took s naming rank 1 (${line:0:160}); nothing left"
  ;;
one-bad)
  slurm_start_one
  f="$(secret_file)"
  chmod 644 "$f"
  set +e
  PLAIT_SECRET_FILE="$f" timeout 120 srun -n2 "$HOST_WORKER" loop >"$out/log" 2>&1
  rc=$?
  set -e
  [ "$rc" != 0 ] || die "a job with a world-readable secret file ran"
  grep -q "PLAIT_SECRET_FILE='$f' can be used by its group or others" "$out/log" ||
    { cat "$out/log"; die "no error naming the secret file"; }
  echo "PASS: world-readable secret file: $(grep -m1 PLAIT_SECRET_FILE "$out/log" | cut -c1-150)"
  # too few resources: Slurm's own refusal, at once; plaitrun's when -np exceeds the allocation
  set +e
  timeout 60 srun --immediate=3 -n8 "$HOST_WORKER" loop >"$out/log8" 2>&1 # else Slurm queues it
  rc=$?
  set -e
  if [ "$rc" = 0 ] || [ "$rc" = 124 ]; then cat "$out/log8"; die "srun -n8 on 2 CPUs: status $rc"; fi
  grep -q "Unable to allocate resources" "$out/log8" || { cat "$out/log8"; die "srun -n8: not Slurm's refusal"; }
  ! grep -q "plait" "$out/log8" || { cat "$out/log8"; die "plait's output where srun could not run"; }
  set +e
  timeout 60 salloc -n2 "$PLAITRUN" -np 4 "$HOST_WORKER" loop >"$out/log" 2>&1
  rc=$?
  set -e
  [ "$rc" = 2 ] || { cat "$out/log"; die "plaitrun -np 4 in a 2-task allocation: status $rc, not 2"; }
  grep -q "plaitrun: -np 4 is more than the 2 task slot(s) of this Slurm allocation (localhost, SLURM_TASKS_PER_NODE=2)" "$out/log" ||
    { cat "$out/log"; die "plaitrun did not name the allocation's slots"; }
  echo "PASS: srun -n8 on 2 CPUs: $(grep -m1 error "$out/log8" | cut -c1-100); plaitrun -np 4 in salloc -n2 refused naming the 2 slots"
  kill "${slurm_pids[1]}" # slurmctld (after munged): srun's own error, in bounded time
  timeout 30 sh -c "while kill -0 ${slurm_pids[1]} 2>/dev/null; do sleep 0.1; done"
  set +e
  t0=$SECONDS
  timeout 120 srun -n1 "$HOST_WORKER" loop >"$out/log" 2>&1
  rc=$?
  set -e
  if [ "$rc" = 0 ] || [ "$rc" = 124 ]; then cat "$out/log"; die "srun with no slurmctld: status $rc"; fi
  grep -qi "unable to\|error" "$out/log" || { cat "$out/log"; die "srun said nothing"; }
  ! grep -q "plait" "$out/log" || { cat "$out/log"; die "plait's output where srun could not run"; }
  echo "PASS: no slurmctld: srun failed in $((SECONDS - t0)) s: $(head -1 "$out/log")"
  ;;
two-srun)
  # shellcheck source=tests/tools/hosts/lib.sh
  . "$src/tests/tools/hosts/lib.sh"
  hosts_require
  hosts_make 2
  trap cleanup EXIT
  slurm_start_two
  PLAIT_SECRET_FILE="$(secret_file)" on_host 1 timeout 300 env SLURM_CONF="$SLURM_CONF" \
    srun -N2 -n4 "$py" examples/torch_train.py --epochs 2 >"$out/log" 2>&1 ||
    { tail -30 "$out/log"; tail -5 "$slurm_dir"/*.log; die "srun -N2 -n4 torch_train.py failed"; }
  expect_trained "$out/log" 4
  # the layout plait derived from srun's variables: rank r on h(r/2+1), local r%2 of 2, cross r/2 of 2
  PLAIT_SECRET_FILE="$out/secret" on_host 1 timeout 120 env SLURM_CONF="$SLURM_CONF" \
    srun -N2 -n4 -l sh -c 'echo "vars $SLURM_PROCID $SLURM_LOCALID $SLURM_STEP_TASKS_PER_NODE $SLURM_STEP_NODELIST $(hostname)"; exec "$0" ops' \
    "$HOST_WORKER" >"$out/layout" 2>&1 || { cat "$out/layout"; die "srun -N2 -n4 host_worker ops failed"; }
  for r in 0 1 2 3; do
    grep -q "^$r: vars $r $((r % 2)) 2(x2) h\[1-2\] h$((r / 2 + 1))$" "$out/layout" ||
      { cat "$out/layout"; die "task $r: not srun's variables expected"; }
    grep -q "^$r: layout rank $r size 4 local $((r % 2))/2 cross $((r / 2))/2" "$out/layout" ||
      { cat "$out/layout"; die "rank $r: wrong layout"; }
  done
  echo "PASS: srun -N2 -n4 on hosts h1, h2: $(grep -m1 'parameters identical' "$out/log"); layout right"
  ;;
two-salloc)
  # plaitrun in a 2-node allocation, no -H: hosts h1:2, h2:2 from the allocation, every rank
  # one srun task on its host, rank 0's address h1 for the others
  # shellcheck source=tests/tools/hosts/lib.sh
  . "$src/tests/tools/hosts/lib.sh"
  hosts_require
  hosts_make 2
  trap cleanup EXIT
  slurm_start_two
  on_host 1 timeout 300 env SLURM_CONF="$SLURM_CONF" salloc -N2 -n4 "$PLAITRUN" -np 4 \
    sh -c 'echo "on $(hostname)"; exec "$0" ops' "$HOST_WORKER" >"$out/log" 2>&1 ||
    { tail -30 "$out/log"; die "salloc -N2 -n4 plaitrun -np 4 failed"; }
  grep -q "starting the ranks with .*srun, not ssh, on h1:2, h2:2 " "$out/log" ||
    { cat "$out/log"; die "plaitrun did not take h1:2, h2:2 from the allocation"; }
  for r in 0 1 2 3; do
    grep -q "^\[$r\]: on h$((r / 2 + 1))$" "$out/log" || { cat "$out/log"; die "rank $r not on h$((r / 2 + 1))"; }
    grep -q "^\[$r\]: layout rank $r size 4 local $((r % 2))/2 cross $((r / 2))/2" "$out/log" ||
      { cat "$out/log"; die "rank $r: wrong layout"; }
  done
  grep -q "every_op ok" "$out/log" || { cat "$out/log"; die "no 'every_op ok'"; }
  echo "PASS: salloc -N2 -n4 plaitrun -np 4: ranks 0,1 on h1 and 2,3 on h2 through srun, every operation right"
  ;;
two-fault)
  # plaitrun in a 2-node allocation: each rank is an srun step of its own, so
  # `scancel --signal=KILL JOB.STEP` kills exactly one rank (3, on h2); the others
  # fail naming rank 3 within PLAIT_TIMEOUT_S + 5 s, plaitrun fails, nothing is left
  # shellcheck source=tests/tools/hosts/lib.sh
  . "$src/tests/tools/hosts/lib.sh"
  hosts_require
  hosts_make 2
  trap cleanup EXIT
  slurm_start_two
  on_host 1 timeout 300 env SLURM_CONF="$SLURM_CONF" PLAIT_TIMEOUT_S=5 salloc -N2 -n4 \
    "$PLAITRUN" --grace 2 -np 4 sh -c 'echo "step $SLURM_JOB_ID.$SLURM_STEP_ID"; exec "$0" loop' \
    "$HOST_WORKER" >"$out/log" 2>&1 &
  salloc_pid=$!
  for _ in $(seq 1 600); do [ "$(grep -c ': ready$' "$out/log" 2>/dev/null)" = 4 ] && break; sleep 0.1; done
  [ "$(grep -c ': ready$' "$out/log")" = 4 ] || { cat "$out/log"; die "the job never got ready"; }
  step="$(sed -n 's/^\[3\]: step \([0-9]*\.[0-9]*\)$/\1/p' "$out/log")"
  [ -n "$step" ] || { cat "$out/log"; die "rank 3's step not printed"; }
  t0="$(date +%s.%N)"
  slurm_run scancel --signal=KILL "$step"
  # The job's verdict is plaitrun's: it names the first rank that failed and
  # stops the others at once (as horovodrun does), so a survivor is often
  # stopped before it prints its own error; when one does print, it must name
  # rank 3 too (or rank 0, which plaitrun stopped first).
  timeout 60 sh -c "while kill -0 $salloc_pid 2>/dev/null; do sleep 0.1; done" ||
    die "the launcher still runs 60 s after rank 3 was killed"
  took="$(awk -v t0="$t0" -v t1="$(date +%s.%N)" 'BEGIN { printf "%.1f", t1 - t0 }')"
  rc=0
  wait "$salloc_pid" || rc=$?
  grep -q '^plaitrun: rank 3 (on h2, over srun) exited with status 137' "$out/log" ||
    { cat "$out/log"; die "plaitrun did not name rank 3 (on h2) as the failed rank"; }
  awk -v t="$took" 'BEGIN { exit !(t <= 10) }' ||
    die "the job ended $took s after the kill (bound: PLAIT_TIMEOUT_S + 5 = 10 s)"
  if line="$(grep -m1 '^\[[0-2]\]: FAILED' "$out/log")"; then
    echo "$line" | grep -q "rank [03]" || die "a survivor's error names neither rank 3 nor rank 0: $line"
  fi
  [ "$rc" != 0 ] || { cat "$out/log"; die "plaitrun exited 0 after rank 3 was killed"; }
  sleep 1
  left="$(leftovers "$HOST_WORKER loop")"
  [ -z "$left" ] || die "processes of the job left: $left"
  echo "PASS: scancel --signal=KILL $step (rank 3 on h2): plaitrun named rank 3 and the job ended in $took s; plaitrun exited $rc; nothing left"
  ;;
two-elastic)
  # plaitrun's elastic driver in a 2-node allocation: the hosts come from a discovery
  # script that lists the allocation's nodes, every worker is an srun step of its own
  # (the srun agent, src/plaitrun/slurm.c); h2's steps killed mid-job, h1's train on
  # shellcheck source=tests/tools/hosts/lib.sh
  . "$src/tests/tools/hosts/lib.sh"
  hosts_require
  hosts_make 2
  trap cleanup EXIT
  slurm_start_two
  train=(--epochs 12 --samples 384 --batch-size 8 --commit-every 3 --step-delay 0.1)
  "$py" examples/elastic_torch.py --reference --out "$out/ref" "${train[@]}" >/dev/null ||
    die "the reference run (no plait) failed"
  # no hosts at all: plaitrun's refusal points at the allocation's nodes
  set +e
  on_host 1 timeout 60 env SLURM_CONF="$SLURM_CONF" salloc -N2 -n4 "$PLAITRUN" --min-np 2 \
    -np 2 true >"$out/nohosts" 2>&1
  rc=$?
  set -e
  [ "$rc" = 2 ] || { cat "$out/nohosts"; die "elastic plaitrun with no hosts in salloc: status $rc, not 2"; }
  grep -q "where workers may run (in this Slurm allocation, of nodes h\[1-2\], a script running 'scontrol show hostnames" "$out/nohosts" ||
    { cat "$out/nohosts"; die "the refusal does not point at the allocation's nodes"; }
  # the discovery script: the allocation's nodes, 2 slots each (--slots-per-host)
  printf '#!/bin/sh\nexec scontrol show hostnames "$SLURM_JOB_NODELIST"\n' >"$out/discover.sh"
  chmod +x "$out/discover.sh"
  on_host 1 timeout 300 env SLURM_CONF="$SLURM_CONF" PLAIT_TIMEOUT_S=5 salloc -N2 -n4 \
    "$PLAITRUN" -np 4 --min-np 2 --max-np 4 --slots-per-host 2 \
    --host-discovery-script "$out/discover.sh" "$py" examples/elastic_torch.py \
    --out "$out/params" "${train[@]}" >"$out/log" 2>&1 &
  salloc_pid=$!
  # rank 0 in its second epoch with 4 workers, or the job gone
  for _ in $(seq 1 1800); do
    grep -q "^\[0\]: step: epoch 1 " "$out/log" && break
    kill -0 "$salloc_pid" 2>/dev/null || break
    sleep 0.1
  done
  grep -q "^\[0\]: step: epoch 1 " "$out/log" || { cat "$out/log"; die "the elastic job never trained"; }
  grep -q "plaitrun elastic: epoch [0-9]* formed: 4 workers on 2 hosts" "$out/log" ||
    { cat "$out/log"; die "no epoch of 4 workers on h1 and h2 was formed"; }
  grep -q "starting the ranks with .*srun, not ssh" "$out/log" ||
    { cat "$out/log"; die "plaitrun did not say it starts the workers with srun"; }
  job="$(slurm_run squeue -h -o '%i' | head -1)"
  steps="$(slurm_run squeue -h -s -j "$job" -o '%i %N' | awk '$2 == "h2" { print $1 }')"
  [ "$(echo "$steps" | grep -c .)" = 2 ] ||
    { slurm_run squeue -s; cat "$out/log"; die "not 2 srun steps on h2: '$steps'"; }
  t0="$(date +%s.%N)"
  for st in $steps; do slurm_run scancel --signal=KILL "$st"; done
  echo "killed h2's steps: $(echo $steps)"
  formed=""
  for _ in $(seq 1 600); do
    [ -z "$formed" ] && grep -q "plaitrun elastic: epoch [0-9]* formed: 2 workers on 1 host" "$out/log" &&
      formed="$(awk -v t0="$t0" -v t1="$(date +%s.%N)" 'BEGIN { printf "%.1f", t1 - t0 }')"
    kill -0 "$salloc_pid" 2>/dev/null || break
    sleep 0.1
  done
  kill -0 "$salloc_pid" 2>/dev/null && { cat "$out/log"; die "the job still runs 60 s after h2's steps were killed"; }
  rc=0
  wait "$salloc_pid" || rc=$?
  cat "$out/log"
  [ "$rc" = 0 ] || die "salloc plaitrun exited $rc, expected 0 (training finished on h1)"
  [ -n "$formed" ] || die "no epoch of 2 workers on 1 host formed after h2's steps were killed"
  awk -v t="$formed" 'BEGIN { exit !(t <= 12) }' ||
    die "the job re-formed $formed s after the kill (bound: 2 x PLAIT_TIMEOUT_S + 2 = 12 s)"
  grep -q "plaitrun elastic: epoch [0-9]* formed: 2 workers on 1 host (h1:2)" "$out/log" ||
    die "the job of 2 workers is not on h1"
  worst="$("$py" -c 'import sys; sys.path.insert(0, sys.argv[1])
from elastic_job import compare_params
print("%.3g" % compare_params(sys.argv[2], sys.argv[3], 2))' \
    "$src/tests/faults/elastic" "$out/params" "$out/ref/reference")" ||
    die "the final parameters are not the reference run's (above)"
  sleep 1
  left="$(leftovers elastic_torch.py)"
  [ -z "$left" ] || die "processes of the job left: $left"
  left="$(slurm_run squeue -h -s -o '%i %j %N')"
  [ -z "$left" ] || die "srun steps left: $left"
  echo "PASS: elastic in salloc -N2: h2's steps killed (scancel --signal=KILL), the job re-formed on h1:2 in $formed s and ended with status 0; parameters equal to the reference (largest difference $worst); no step or process left"
  ;;
*) die "unknown scenario $scenario" ;;
esac
