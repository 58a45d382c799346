#!/bin/bash
# plaitrun's elastic driver end to end with real plait workers
# (elastic_worker.c) on "hosts" of this machine (127.0.0.x) listed by a
# discovery script. Usage: e2e.sh PLAITRUN WORKER SCENARIO
#   kill:  127.0.0.1:2 and 127.0.0.2:2; kill -9 of one worker; the 3 others
#          re-form epoch 2 and train on
#   stop:  the same with SIGSTOP: the survivors name the silent rank lost
#          (after PLAIT_TIMEOUT_S), the driver kills it, epoch 2 of 3
#   hosts: 127.0.0.1:2; 127.0.0.3:2 added: its workers join at epoch 2 (the
#          running ones learn it from plait_elastic_host_updates); then
#          127.0.0.1 removed: its workers are stopped, epoch 3 on 127.0.0.3
set -u
plaitrun=$1 worker=$2 scenario=$3
dir=$(mktemp -d /tmp/plaitrun_e2e_XXXXXX)
pid=
trap '[ -n "$pid" ] && kill -9 $pid 2>/dev/null; rm -rf "$dir"' EXIT
printf '#!/bin/sh\ncat "%s/hosts"\n' "$dir" > "$dir/discover.sh"
chmod +x "$dir/discover.sh"
set_hosts() { printf "$1" > "$dir/hosts.tmp" && mv "$dir/hosts.tmp" "$dir/hosts"; }
if [ "$scenario" != hosts ]; then set_hosts '127.0.0.1:2\n127.0.0.2:2\n'; else set_hosts '127.0.0.1:2\n'; fi
export PLAIT_TIMEOUT_S=${PLAIT_TIMEOUT_S:-5} PLAIT_TRANSPORT=${PLAIT_TRANSPORT:-gloo}
"$plaitrun" --min-np 2 --max-np 4 --host-discovery-script "$dir/discover.sh" \
  "$worker" "$dir/done" > "$dir/out" 2>&1 &
pid=$!

wait_for() { # text, seconds
  local end=$((SECONDS + $2))
  until grep -qF -- "$1" "$dir/out"; do
    if [ $SECONDS -ge $end ] || ! kill -0 $pid 2>/dev/null; then
      echo "e2e: no '$1' in plaitrun's output:"; cat "$dir/out"; exit 1
    fi
    sleep 0.1
  done
}

if [ "$scenario" != hosts ]; then
  wait_for "epoch 1 formed: 4 workers on 2 hosts (127.0.0.1:2 127.0.0.2:2)" 120
  wait_for "[3]: epoch 1 rank 3 size 4 pid" 60
  victim=$(grep -F "[3]: epoch 1 rank 3 size 4 pid" "$dir/out" | sed 's/.* pid //')
  if [ "$scenario" = kill ]; then
    kill -9 "$victim"
    wait_for "was killed by signal 9" 30
  else
    kill -STOP "$victim"
    wait_for "worker 127.0.0.2/1 (rank 3 of epoch 1) was named lost by" 60
  fi
  wait_for "epoch 2 formed: 3 workers on 2 hosts" 120
  wait_for "[2]: epoch 2 rank 2 size 3" 60
else
  wait_for "epoch 1 formed: 2 workers on 1 host (127.0.0.1:2)" 120
  set_hosts '127.0.0.1:2\n127.0.0.3:2\n'
  wait_for "epoch 2 formed: 4 workers on 2 hosts (127.0.0.1:2 127.0.0.3:2)" 120
  wait_for "[3]: epoch 2 rank 3 size 4" 60
  set_hosts '127.0.0.3:2\n'
  wait_for "epoch 3 formed: 2 workers on 1 host (127.0.0.3:2)" 120
  wait_for "[1]: epoch 3 rank 1 size 2" 60
  wait_for "[127.0.0.1/0]: removed: PLAIT_ERR_SHUTDOWN" 60
fi
touch "$dir/done"
end=$((SECONDS + 90))
while kill -0 $pid 2>/dev/null && [ $SECONDS -lt $end ]; do sleep 0.2; done
wait $pid; status=$?
cat "$dir/out"
[ $status -eq 0 ] || { echo "e2e: plaitrun exited $status, expected 0"; exit 1; }
echo "e2e: ok"
