#!/bin/bash
# plaitrun's elastic driver end to end with real plait workers
# (elastic_worker.c): two "hosts" of this machine, 127.0.0.1:2 and
# 127.0.0.2:2, from a discovery script; kill -9 of one worker; the 3 others
# re-form epoch 2 and train on. Usage: e2e.sh PLAITRUN WORKER
set -u
plaitrun=$1 worker=$2
dir=$(mktemp -d /tmp/plaitrun_e2e_XXXXXX)
trap 'kill -9 $pid 2>/dev/null; rm -rf "$dir"' EXIT
printf '#!/bin/sh\nprintf "127.0.0.1:2\\n127.0.0.2:2\\n"\n' > "$dir/discover.sh"
chmod +x "$dir/discover.sh"
export PLAIT_TIMEOUT_S=${PLAIT_TIMEOUT_S:-10} PLAIT_TRANSPORT=${PLAIT_TRANSPORT:-gloo}
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

wait_for "epoch 1 formed: 4 workers on 2 hosts (127.0.0.1:2 127.0.0.2:2)" 120
wait_for "[3]: epoch 1 rank 3 size 4 pid" 60
victim=$(grep -F "[3]: epoch 1 rank 3 size 4 pid" "$dir/out" | sed 's/.* pid //')
kill -9 "$victim"
wait_for "was killed by signal 9" 30
wait_for "epoch 2 formed: 3 workers on 2 hosts" 120
wait_for "[2]: epoch 2 rank 2 size 3" 60
touch "$dir/done"
end=$((SECONDS + 90))
while kill -0 $pid 2>/dev/null && [ $SECONDS -lt $end ]; do sleep 0.2; done
wait $pid; status=$?
cat "$dir/out"
[ $status -eq 0 ] || { echo "e2e: plaitrun exited $status, expected 0"; exit 1; }
echo "e2e: ok"
