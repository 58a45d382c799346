#!/usr/bin/env bash
# Several hosts out of network namespaces: a job that spans them, then faults.
#
#   tests/tools/hosts/run.sh SCENARIO TRANSPORT     (ctest runs it: hosts_*)
#
# SCENARIO: env-plait | env-ompi | env-slurm  ranks started by hand on each host
#                                    with that launcher's variables; every
#                                    operation checked; local/cross ranks checked
#           ssh                      plaitrun -H h1:2,h2:2 over ssh (an sshd per host)
#           ssh-kill                 the same (no command line shows the secret), then
#                                    every process of host 2 is killed
#           cut                      a host's link goes down mid-job
#           kill                     a host's processes are killed mid-job
#           hier                     2 hosts x 2 ranks started by hand with
#                                    PLAIT_HIERARCHICAL_ALLREDUCE=on and _ALLGATHER=on:
#                                    4 MB allreduces for 3 s, each checked, then every
#                                    operation; every rank must log hierarchical
#                                    allreduces and allgathers, their steps within
#                                    the host over ofi shm (ofi: FI_PROVIDER=tcp,shm)
#           hier-kill                kill with PLAIT_HIERARCHICAL_ALLREDUCE=on: a
#                                    lost rank is still named
#           hier-stop                the same with host 3's processes stopped
#                                    (SIGSTOP) inside the hierarchical allreduce
#           elastic-host-killed      plaitrun's elastic driver (--min-np 2 --max-np 4,
#                                    a discovery script) runs examples/elastic_torch.py
#                                    on h1:2 and h2:2, h2's workers over ssh; every
#                                    worker of h2 is killed: h1's train on
#           elastic-host-added       the same from h1:2 alone; h2:2 is added to the
#                                    discovery script's hosts: its workers join (4)
#                                    Both end with plaitrun's status 0 and every rank's
#                                    parameters equal to a run without plait
#                                    (tests/faults/elastic/elastic_job.py compares).
# TRANSPORT: gloo | ofi (libfabric tcp) | auto (unset FI_PROVIDER; env-* checks
#            that every rank chose ofi over tcp;ofi_rxm, logged once)
# Env: PLAITRUN, HOST_WORKER (paths; ctest sets them).
#
# Each run makes its own namespaces (tests/tools/hosts/lib.sh: a switch,
# h1..hN on veth pairs, 10.77.0.<n>/24, host names h<n>). Link 2 is shaped with tc
# (tbf: 200 Mbit/s; netem: 2 ms delay where the kernel has it). Everything
# is removed on exit, also after a failure. Needs root, iproute2, and for ssh
# openssh-server and openssh-client; without them the test is skipped (77)
# with the reason.
set -euo pipefail
scenario="${1:?scenario}"
transport="${2:?transport}"
: "${PLAITRUN:?path of plaitrun}" "${HOST_WORKER:?path of host_worker}"
TIMEOUT_S=5  # PLAIT_TIMEOUT_S of the fault scenarios
# What the fault scenarios allow beyond it: the margin docs/design.md
# promises ("What plait promises under faults and attack"): a rank names a
# silent peer, rank 0 included, within PLAIT_TIMEOUT_S plus the blame round
# and slack for a loaded machine.
MARGIN_S=5

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=lib.sh
. "$here/lib.sh"
hosts_require
nhosts=2
case "$scenario" in cut|kill|hier-kill|hier-stop) nhosts=3 ;; esac
hosts_make "$nhosts"
hosts_shape_link2

common_env=(PLAIT_TRANSPORT="$transport" PLAIT_START_TIMEOUT_S=60)
if [ "$transport" = ofi ]; then common_env+=(FI_PROVIDER=tcp FI_TCP_IFACE=eth0); fi
# auto: nothing named; the choice is checked below (ofi over tcp across hosts)
if [ "$transport" = auto ]; then common_env+=(PLAIT_LOG_LEVEL=info); fi
case "$scenario" in
hier) common_env+=(PLAIT_HIERARCHICAL_ALLREDUCE=on PLAIT_HIERARCHICAL_ALLGATHER=on PLAIT_LOG_LEVEL=debug
  HOST_WORKER_FLOATS=1000000)
  # shm left in for the local set's own instance (ofi across hosts over tcp)
  if [ "$transport" = ofi ]; then common_env+=(FI_PROVIDER=tcp,shm); fi ;;
hier-kill|hier-stop) common_env+=(PLAIT_HIERARCHICAL_ALLREDUCE=on) ;;
esac
secret="$(od -An -N32 -tx1 /dev/urandom | tr -d ' \n')"

# Starts the job by hand: slots ranks per host, launcher variables of $1.
start_by_hand() {
  local launcher="$1" mode="$2" slots="$3" r n l
  local size=$((nhosts * slots))
  for n in $(seq 1 "$nhosts"); do
    for l in $(seq 0 $((slots - 1))); do
      r=$(((n - 1) * slots + l))
      local vars=()
      case "$launcher" in
        plait) vars=(PLAIT_RANK=$r PLAIT_SIZE=$size PLAIT_LOCAL_RANK=$l PLAIT_LOCAL_SIZE=$slots) ;;
        ompi) vars=(OMPI_COMM_WORLD_RANK=$r OMPI_COMM_WORLD_SIZE=$size
                    OMPI_COMM_WORLD_LOCAL_RANK=$l OMPI_COMM_WORLD_LOCAL_SIZE=$slots) ;;
        slurm) vars=(SLURM_PROCID=$r SLURM_NTASKS=$size SLURM_LOCALID=$l) ;;
      esac
      on_host "$n" env "${common_env[@]}" "${vars[@]}" PLAIT_SECRET="$secret" \
        PLAIT_RENDEZVOUS=10.77.0.1:29500 PLAIT_TIMEOUT_S=$TIMEOUT_S \
        "$HOST_WORKER" $mode >"$tmp/out.$r" 2>&1 & # $mode: "run S" is two words
      pids+=($!)
    done
  done
}

# layout lines: rank r of slots-per-host jobs: local r%slots, cross r/slots.
check_layout() {
  local file="$1" r="$2" size="$3" slots="$4"
  local want="layout rank $r size $size local $((r % slots))/$slots cross $((r / slots))/$((size / slots))"
  grep -q "$want" "$file" || die "rank $r: expected '$want'; got: $(grep layout "$file" || cat "$file")"
}

# An sshd on each host (port 2222, a host key and a user key made for this
# run) and an ssh config for plaitrun: $tmp/ssh_config.
start_sshds() {
  sshd=/usr/sbin/sshd
  [ -x "$sshd" ] || skip "no $sshd (openssh-server)"
  command -v ssh >/dev/null && command -v ssh-keygen >/dev/null || skip "no ssh (openssh-client)"
  mkdir -p /run/sshd
  ssh-keygen -q -t ed25519 -N '' -f "$tmp/host_key"
  ssh-keygen -q -t ed25519 -N '' -f "$tmp/user_key"
  cp "$tmp/user_key.pub" "$tmp/authorized_keys"
  for n in $(seq 1 "$nhosts"); do
    cat >"$tmp/sshd_config.$n" <<CFG
ListenAddress 10.77.0.$n
Port 2222
HostKey $tmp/host_key
AuthorizedKeysFile $tmp/authorized_keys
PermitRootLogin prohibit-password
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
StrictModes no
PidFile $tmp/sshd.$n.pid
CFG
    echo "[10.77.0.$n]:2222 $(cut -d' ' -f1,2 "$tmp/host_key.pub")" >>"$tmp/known_hosts"
    on_host "$n" "$sshd" -D -e -f "$tmp/sshd_config.$n" 2>"$tmp/sshd.$n.log" &
    pids+=($!)
  done
  cat >"$tmp/ssh_config" <<CFG
Host 10.77.0.*
  Port 2222
  User root
  IdentityFile $tmp/user_key
  IdentitiesOnly yes
  UserKnownHostsFile $tmp/known_hosts
  StrictHostKeyChecking yes
  ConnectTimeout 20
CFG
  for n in $(seq 1 "$nhosts"); do # wait for each sshd to answer
    for _ in $(seq 1 100); do
      on_host 1 ssh -F "$tmp/ssh_config" -o BatchMode=yes 10.77.0.$n true 2>/dev/null && break
      sleep 0.2
    done
  done
}

case "$scenario" in
env-*)
  start_by_hand "${scenario#env-}" ops 2
  status=0
  for p in "${pids[@]}"; do wait "$p" || status=1; done
  pids=()
  for r in 0 1 2 3; do
    grep -q "every_op ok" "$tmp/out.$r" || { echo "rank $r:"; cat "$tmp/out.$r"; status=1; }
    check_layout "$tmp/out.$r" "$r" 4 2
    [ "$transport" != auto ] || grep -q "^transport ofi$" "$tmp/out.$r" ||
      die "rank $r: PLAIT_TRANSPORT=auto did not choose ofi: $(grep -a transport "$tmp/out.$r")"
  done
  if [ "$transport" = auto ]; then
    want="transport auto: ofi (tcp;ofi_rxm; 4 ranks on several hosts)"
    grep -qF "$want" "$tmp/out.0" || die "rank 0 did not log '$want': $(grep -a auto "$tmp/out.0")"
    [ "$(cat "$tmp"/out.* | grep -c "transport auto:")" = 1 ] || die "the choice was not logged once"
  fi
  [ $status = 0 ] || die "the job across 2 hosts failed (above)"
  echo "PASS: every operation across 2 hosts x 2 ranks over $transport, ${scenario#env-}'s variables"
  ;;
ssh)
  start_sshds
  status=0
  on_host 1 env "${common_env[@]}" PLAITRUN_SSH="ssh -F $tmp/ssh_config" \
    "$PLAITRUN" -np 4 -H 10.77.0.1:2,10.77.0.2:2 "$HOST_WORKER" ops >"$tmp/out" 2>&1 || status=$?
  cat "$tmp/out"
  [ $status = 0 ] || { cat "$tmp"/sshd.*.log; die "plaitrun -H over ssh exited $status"; }
  for r in 0 1 2 3; do
    grep "^\[$r\]: " "$tmp/out" >"$tmp/out.$r" || true
    grep -q "every_op ok" "$tmp/out.$r" || die "rank $r did not finish every operation"
    check_layout "$tmp/out.$r" "$r" 4 2
  done
  echo "PASS: plaitrun -np 4 -H 10.77.0.1:2,10.77.0.2:2 over ssh, $transport"
  ;;
ssh-kill)
  # plaitrun -H over ssh, then host 2 dies (every process in it, sshd too):
  # plaitrun must stop the job, a rank of host 2 must be named (by plaitrun or
  # by the ranks of host 1), and no rank may be left running on host 1 (the
  # remote wrapper stops a rank whose ssh ended).
  start_sshds
  on_host 1 env "${common_env[@]}" PLAITRUN_SSH="ssh -F $tmp/ssh_config" PLAIT_SECRET="$secret" \
    PLAIT_TIMEOUT_S=$TIMEOUT_S "$PLAITRUN" --grace 1 -np 4 -H 10.77.0.1:2,10.77.0.2:2 \
    "$HOST_WORKER" loop >"$tmp/out" 2>&1 &
  plaitrun_pid=$!
  pids+=($plaitrun_pid)
  for _ in $(seq 1 600); do [ "$(grep -c ': ready$' "$tmp/out")" = 4 ] && break; sleep 0.1; done
  [ "$(grep -c ': ready$' "$tmp/out")" = 4 ] || { cat "$tmp/out"; die "the job never got ready"; }
  # the secret travels on ssh's stdin: no command line on any host shows it
  shown="$(grep -l -a -- "$secret" /proc/[0-9]*/cmdline 2>/dev/null || true)"
  [ -z "$shown" ] || die "the secret is on a command line: $(cat $shown | tr '\0' ' ')"
  t0="$(date +%s.%N)"
  for _ in 1 2; do ip netns pids "plait-$id-h2" | xargs -r kill -9 2>/dev/null || true; done # twice: what forked meanwhile
  echo "killed every process of host 2 (ranks 2, 3, its sshd)"
  status=0
  for _ in $(seq 1 $(((TIMEOUT_S + MARGIN_S) * 10))); do
    kill -0 "$plaitrun_pid" 2>/dev/null || break
    sleep 0.1
  done
  if kill -0 "$plaitrun_pid" 2>/dev/null; then
    cat "$tmp/out"; die "plaitrun still runs $((TIMEOUT_S + MARGIN_S)) s after host 2 died"
  fi
  wait "$plaitrun_pid" || status=$?
  took="$(awk -v b="$t0" -v a="$(date +%s.%N)" 'BEGIN { printf "%.1f", a - b }')"
  cat "$tmp/out"
  [ "$status" != 0 ] || die "plaitrun exited 0 after host 2 died"
  # Whoever plaitrun hears from first: ssh of rank 2 or 3 (status 255, named
  # with its host), or rank 0 or 1 failing with an error that names 2 or 3.
  grep -q "plaitrun: rank [23] (on 10.77.0.2, over ssh)" "$tmp/out" ||
    grep -q "^\[[01]\]: FAILED .*rank[s]* [23]" "$tmp/out" ||
    die "neither plaitrun nor the ranks of host 1 named a rank of host 2"
  for _ in $(seq 1 50); do # the ranks of host 1 are stopped, by their wrapper
    left="$(ip netns pids "plait-$id-h1" | xargs -r ps -o comm= -p 2>/dev/null | grep -c host_worker || true)"
    [ "$left" = 0 ] && break
    sleep 0.1
  done
  [ "$left" = 0 ] || die "$left rank(s) still running on host 1 after plaitrun exited"
  echo "PASS: host 2 killed under plaitrun -H over $transport: plaitrun exited $status after ${took} s, a rank of host 2 named; nothing left on host 1"
  ;;
hier)
  start_by_hand plait "run 3" 2
  status=0
  for p in "${pids[@]}"; do wait "$p" || status=1; done
  pids=()
  for r in 0 1 2 3; do
    grep -q "^done " "$tmp/out.$r" || { echo "rank $r:"; tail -20 "$tmp/out.$r"; status=1; }
    check_layout "$tmp/out.$r" "$r" 4 2
    n="$(grep -c "hierarchical allreduce of" "$tmp/out.$r" || true)"
    [ "$n" -gt 0 ] || die "rank $r ran no hierarchical allreduce: $(grep -a hier "$tmp/out.$r" | head -3)"
    g="$(grep -c "hierarchical allgather of" "$tmp/out.$r" || true)"
    [ "$g" -gt 0 ] || die "rank $r ran no hierarchical allgather: $(grep -a hier "$tmp/out.$r" | head -3)"
    # the steps within the host over shared memory (hier_local.h), across over the job's
    grep -q "within the host (ofi shm), .* across hosts ($transport)" "$tmp/out.$r" ||
      die "rank $r: the steps within the host did not run over ofi shm: $(grep -a "hier\]" "$tmp/out.$r" | head -3)"
    echo "rank $r: $(grep "^done " "$tmp/out.$r") steps, $n hierarchical allreduces, $g allgathers"
  done
  [ $status = 0 ] || die "the hierarchical job across 2 hosts failed (above)"
  echo "PASS: hierarchical allreduce across 2 hosts x 2 ranks over $transport: every 4 MB result and every operation right"
  ;;
cut|kill|hier-kill|hier-stop)
  start_by_hand plait loop 2
  for r in 0 1 2 3 4 5; do # every rank has done one allreduce
    for _ in $(seq 1 600); do grep -q ready "$tmp/out.$r" 2>/dev/null && break; sleep 0.1; done
    grep -q ready "$tmp/out.$r" || { cat "$tmp"/out.*; die "rank $r never got ready"; }
  done
  sleep 1
  t0="$(date +%s.%N)"
  if [ "$scenario" = cut ]; then
    ip -n "$sw" link set "pl${id}s3" down
    echo "cut host 3's link (ranks 4, 5) at $t0"
  elif [ "$scenario" = hier-stop ]; then
    ip netns pids "plait-$id-h3" | xargs -r kill -STOP 2>/dev/null || true
    echo "stopped host 3's processes (ranks 4, 5) at $t0"
  else
    for _ in 1 2; do ip netns pids "plait-$id-h3" | xargs -r kill -9 2>/dev/null || true; done # twice: what forked meanwhile
    echo "killed host 3's processes (ranks 4, 5) at $t0"
  fi
  deadline=$((TIMEOUT_S + MARGIN_S + 30)) # then the test gives up waiting: a hang
  survivors=(0 1 2 3)
  [ "$scenario" = cut ] && survivors=(0 1 2 3 4 5)
  status=0
  for r in "${survivors[@]}"; do
    for _ in $(seq 1 $((deadline * 10))); do grep -q FAILED "$tmp/out.$r" && break; sleep 0.1; done
    line="$(grep -m1 FAILED "$tmp/out.$r" || true)"
    if [ -z "$line" ]; then echo "rank $r: no error after ${deadline} s (a hang)"; status=1; continue; fi
    t="$(echo "$line" | cut -d' ' -f2)"
    took="$(awk -v a="$t" -v b="$t0" 'BEGIN { printf "%.1f", a - b }')"
    named="$( (echo "$line" | grep -o 'rank[s]* [0-9][0-9, and]*' | grep -o '[0-9]\+' | sort -un |
      tr '\n' ' ') || true)"
    if [ "$r" -le 3 ]; then want="4 5"; else want="0 1 2 3"; fi
    hit=0
    for w in $want; do case " $named" in *" $w "*) hit=1 ;; esac; done
    echo "rank $r: error after ${took} s, names ranks [${named% }]: ${line#FAILED * }"
    if awk -v t="$took" -v m=$((TIMEOUT_S + MARGIN_S)) 'BEGIN { exit !(t > m) }'; then
      echo "  -> later than PLAIT_TIMEOUT_S=$TIMEOUT_S + $MARGIN_S s"; status=1
    fi
    [ $hit = 1 ] || { echo "  -> names none of the unreachable ranks ($want)"; status=1; }
  done
  [ $status = 0 ] || die "$scenario: not every rank failed in time naming an unreachable rank"
  echo "PASS: $scenario of host 3 over $transport: every rank failed within ${TIMEOUT_S}+${MARGIN_S} s naming an unreachable rank"
  ;;
elastic-*)
  # The elastic driver on h1, workers over ssh on h2 (and on h1, directly or
  # over ssh: whichever plaitrun's is_this_host decides).
  root="$(cd "$(dirname "$0")/../../.." && pwd)"
  python=/usr/bin/python3
  # skipped while plaitrun has no elastic driver or plait.torch.elastic refuses
  "$python" -c 'import sys; sys.path.insert(0, sys.argv[1])
import elastic_job
try:
    elastic_job.probe(sys.argv[2], sys.argv[3])
except elastic_job.Skip as e:
    print(e); sys.exit(77)
except elastic_job.Failed as e:
    print(e); sys.exit(1)' "$root/tests/faults/elastic" "$PLAITRUN" "$(dirname "$PLAITRUN")/.." \
    >"$tmp/probe" 2>&1 || { rc=$?; [ $rc = 77 ] && skip "$(cat "$tmp/probe")"; die "$(cat "$tmp/probe")"; }
  start_sshds
  train=(--epochs 12 --samples 384 --batch-size 8 --commit-every 3 --step-delay 0.1)
  "$python" "$root/examples/elastic_torch.py" --reference --out "$tmp/ref" "${train[@]}" >/dev/null
  printf '10.77.0.1:2\n' >"$tmp/hosts"
  [ "$scenario" = elastic-host-killed ] && printf '10.77.0.1:2\n10.77.0.2:2\n' >"$tmp/hosts"
  printf '#!/bin/sh\nexec cat %s\n' "$tmp/hosts" >"$tmp/discover.sh"
  chmod +x "$tmp/discover.sh"
  np=4
  [ "$scenario" = elastic-host-added ] && np=2
  # the driver's rendezvous on h1's address (the host names h<n> resolve nowhere)
  on_host 1 env "${common_env[@]}" PLAITRUN_SSH="ssh -F $tmp/ssh_config" PLAIT_SECRET="$secret" \
    PLAITRUN_ELASTIC_HOST=10.77.0.1 PLAIT_TIMEOUT_S=$TIMEOUT_S "$PLAITRUN" -np $np --min-np 2 --max-np 4 \
    --host-discovery-script "$tmp/discover.sh" "$python" "$root/examples/elastic_torch.py" \
    --out "$tmp/params" "${train[@]}" >"$tmp/out" 2>&1 &
  plaitrun_pid=$!
  pids+=($plaitrun_pid)
  # rank 0 in its second epoch, or plaitrun gone
  for _ in $(seq 1 3000); do
    grep -q "^\[0\]: step: epoch 1 " "$tmp/out" && break
    kill -0 "$plaitrun_pid" 2>/dev/null || break
    sleep 0.1
  done
  grep -q "^\[0\]: step: epoch 1 " "$tmp/out" || { cat "$tmp/out"; die "the elastic job never trained"; }
  t0="$(date +%s.%N)"
  if [ "$scenario" = elastic-host-killed ]; then
    victims="$(ip netns pids "plait-$id-h2" | while read -r p; do
      grep -qa elastic_torch.py "/proc/$p/cmdline" 2>/dev/null && echo "$p"; done || true)"
    [ "$(echo "$victims" | grep -c .)" -ge 2 ] || { cat "$tmp/out"; die "no 2 workers on h2: '$victims'"; }
    echo "$victims" | xargs -r kill -9
    echo "killed every worker of h2 (pids $(echo $victims))"
    want_size=2
  else
    printf '10.77.0.1:2\n10.77.0.2:2\n' >"$tmp/hosts.new" && mv "$tmp/hosts.new" "$tmp/hosts"
    echo "added 10.77.0.2:2 to the discovery script's hosts"
    want_size=4
  fi
  status=0
  for _ in $(seq 1 6000); do kill -0 "$plaitrun_pid" 2>/dev/null || break; sleep 0.1; done
  kill -0 "$plaitrun_pid" 2>/dev/null && { cat "$tmp/out"; die "plaitrun still runs after 600 s"; }
  wait "$plaitrun_pid" || status=$?
  cat "$tmp/out"
  [ $status = 0 ] || die "$scenario: plaitrun exited $status, expected 0 (training finished)"
  formed="$(grep -m1 -n "plaitrun elastic: epoch [0-9]* formed: $want_size workers" "$tmp/out" |
    tail -1 || true)"
  [ -n "$formed" ] || die "$scenario: no epoch of $want_size workers was formed"
  "$python" -c 'import sys; sys.path.insert(0, sys.argv[1])
from elastic_job import compare_params
print("largest difference from the reference: %.3g" % compare_params(sys.argv[2], sys.argv[3], int(sys.argv[4])))' \
    "$root/tests/faults/elastic" "$tmp/params" "$tmp/ref/reference" "$want_size" ||
    die "$scenario: the final parameters are not the reference run's (above)"
  took="$(awk -v b="$t0" -v a="$(date +%s.%N)" 'BEGIN { printf "%.1f", a - b }')"
  echo "PASS: $scenario over ssh, $transport: training ended on $want_size ranks ${took} s later, parameters equal to the reference run's"
  ;;
*) die "unknown scenario '$scenario'" ;;
esac
