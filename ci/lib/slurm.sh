# Sourced by ci/test and the Slurm tests (tests/tools/slurm/, bench/launchers/slurm.sh):
# installs Debian's Slurm (slurm-wlm: slurmctld, slurmd, srun, sbatch, salloc,
# scancel, scontrol) and munge, and starts a private Slurm cluster for one test.
#
#   plait_slurm_install        the packages, through plait_ensure_packages (root)
#   slurm_require              exits 77 with the reason when not root or Slurm is missing
#   slurm_start_one            one node, "localhost" (127.0.0.1), on this machine
#   slurm_start_two            two nodes h1, h2 on network-namespace hosts
#                              (tests/tools/hosts/lib.sh's hosts_make 2 first)
#   slurm_run CMD...           runs CMD where the cluster's clients belong (this
#                              machine, or host 1) with SLURM_CONF set
#   slurm_job_state ID         the job's state (COMPLETED, FAILED, ...) from scontrol
#   slurm_wait_job ID SECS     waits for the job to end; prints its final state
#   slurm_stop                 stops every daemon it started (by pid) and removes the folder
#
# Everything lives in one private folder ($slurm_dir): munge's key, socket,
# seed, log and pid; slurmctld's state, log and pid; each slurmd's spool, log
# and pid; slurm.conf. munged runs with its own socket (AuthInfo=socket=...),
# the ports are picked free, SlurmUser=root, no cgroups (proctrack/linuxproc,
# task/none), so nothing of the machine's own Slurm or munge is used or
# touched. Clients find the cluster through SLURM_CONF (exported).

_slurm_lib_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"

plait_slurm_install() {
  # shellcheck source=ci/lib/deps.sh
  . "$_slurm_lib_dir/deps.sh"
  plait_ensure_packages slurm-wlm slurmctld slurmd slurm-client munge
}

slurm_require() {
  [ "$(id -u)" = 0 ] || { echo "SKIP: a private Slurm cluster needs root (SlurmUser=root)"; exit 77; }
  local c
  for c in slurmctld slurmd srun sbatch salloc scancel scontrol munged; do
    command -v "$c" >/dev/null || {
      echo "SKIP: no '$c': install Slurm and munge (ci/lib/slurm.sh: plait_slurm_install)"
      exit 77
    }
  done
}

slurm_pids=()
slurm_dir=""
slurm_where=() # the prefix that runs a client where the cluster is (host 1)

_slurm_free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

# munged with its own key, socket and files, in the foreground (its pid kept).
_slurm_start_munge() {
  dd if=/dev/urandom of="$slurm_dir/munge.key" bs=1024 count=1 status=none
  chmod 600 "$slurm_dir/munge.key"
  munged -F --force --socket="$slurm_dir/munge.sock" --key-file="$slurm_dir/munge.key" \
    --pid-file="$slurm_dir/munged.pid" --log-file="$slurm_dir/munged.log" \
    --seed-file="$slurm_dir/munged.seed" >"$slurm_dir/munged.out" 2>&1 &
  slurm_pids+=($!)
  local i
  for i in $(seq 1 50); do
    [ -S "$slurm_dir/munge.sock" ] && return 0
    sleep 0.1
  done
  echo "slurm: munged did not start: $(tail -3 "$slurm_dir/munged.log" "$slurm_dir/munged.out" 2>/dev/null)" >&2
  return 1
}

# slurm.conf: $1 the controller's host(addr), then "name addr" pairs of nodes.
_slurm_write_conf() {
  local ctl="$1"; shift
  local ctld_port="$slurm_ctld_port" d_port="$slurm_d_port"
  cat >"$slurm_dir/slurm.conf" <<EOF
ClusterName=plait
SlurmctldHost=$ctl
SlurmctldPort=$ctld_port
SlurmdPort=$d_port
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$slurm_dir/munge.sock
StateSaveLocation=$slurm_dir/ctld-state
SlurmdSpoolDir=$slurm_dir/slurmd-%n
SlurmctldPidFile=$slurm_dir/slurmctld.pid
SlurmdPidFile=$slurm_dir/slurmd-%n.pid
SlurmctldLogFile=$slurm_dir/slurmctld.log
SlurmdLogFile=$slurm_dir/slurmd-%n.log
SlurmctldDebug=info
SlurmdDebug=info
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
MpiDefault=none
ReturnToService=2
SwitchType=switch/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SlurmdParameters=config_overrides
SchedulerType=sched/builtin
InactiveLimit=0
KillWait=5
MinJobAge=300
SlurmdTimeout=30
MessageTimeout=10
EOF
  # no cgroups are used (proctrack/linuxproc, task/none), but slurmd loads the
  # cgroup plugin: v1 named, since autodetect needs /sys/fs/cgroup mounted,
  # which a network-namespace host (ip netns exec: a fresh /sys) lacks
  echo "CgroupPlugin=cgroup/v1" >"$slurm_dir/cgroup.conf"
  local names=()
  while [ $# -gt 0 ]; do
    echo "NodeName=$1 NodeHostname=$1 NodeAddr=$2 CPUs=2 State=UNKNOWN" >>"$slurm_dir/slurm.conf"
    names+=("$1")
    shift 2
  done
  local IFS=,
  echo "PartitionName=plait Nodes=${names[*]} Default=YES MaxTime=INFINITE State=UP OverSubscribe=YES" \
    >>"$slurm_dir/slurm.conf"
}

# Waits until scontrol sees every node idle (bounded).
_slurm_wait_idle() {
  local want="$1" i states
  for i in $(seq 1 150); do
    states="$(slurm_run sinfo -h -N -o '%N %T' 2>/dev/null)"
    if [ "$(printf '%s\n' "$states" | grep -c ' idle$')" -ge "$want" ]; then return 0; fi
    sleep 0.2
  done
  echo "slurm: the nodes did not become idle in 30 s: ${states:-no answer}" >&2
  tail -5 "$slurm_dir"/slurmctld.log "$slurm_dir"/slurmd-*.log >&2 2>/dev/null
  return 1
}

_slurm_prepare() {
  slurm_dir="$(mktemp -d /tmp/plait-slurm-XXXXXX)"
  chmod 700 "$slurm_dir"
  mkdir -p "$slurm_dir/ctld-state"
  export SLURM_CONF="$slurm_dir/slurm.conf"
  slurm_ctld_port="$(_slurm_free_port)"
  slurm_d_port="$(_slurm_free_port)"
  while [ "$slurm_d_port" = "$slurm_ctld_port" ]; do slurm_d_port="$(_slurm_free_port)"; done
  # Slurm's own variables of an enclosing job would confuse the clients
  local v
  for v in $(env | sed -n 's/^\(SLURM_[A-Z_]*\)=.*/\1/p'); do
    [ "$v" = SLURM_CONF ] || unset "$v"
  done
}

_slurm_start_ctld() {
  "${slurm_where[@]}" slurmctld -D -i -f "$SLURM_CONF" >"$slurm_dir/slurmctld.out" 2>&1 &
  slurm_pids+=($!)
}

_slurm_start_d() { # $1 node name, then the prefix that runs it on its host
  local name="$1"; shift
  mkdir -p "$slurm_dir/slurmd-$name"
  "$@" slurmd -D -N "$name" -f "$SLURM_CONF" >"$slurm_dir/slurmd-$name.out" 2>&1 &
  slurm_pids+=($!)
}

slurm_start_one() {
  _slurm_prepare
  slurm_where=()
  local me
  me="$(hostname -s)"
  _slurm_write_conf "$me(127.0.0.1)" localhost 127.0.0.1
  _slurm_start_munge || return 1
  _slurm_start_ctld
  _slurm_start_d localhost env
  _slurm_wait_idle 1
}

# On tests/tools/hosts/lib.sh's hosts h1 and h2 (10.77.0.1, .2); the names
# resolve inside them through /etc/netns/<namespace>/hosts, which ip netns
# exec mounts over /etc/hosts.
slurm_start_two() {
  _slurm_prepare
  local n
  for n in 1 2; do
    mkdir -p "/etc/netns/plait-$id-h$n"
    printf '127.0.0.1 localhost\n10.77.0.1 h1\n10.77.0.2 h2\n' >"/etc/netns/plait-$id-h$n/hosts"
    slurm_netns+=("/etc/netns/plait-$id-h$n")
  done
  slurm_where=(on_host 1)
  _slurm_write_conf "h1(10.77.0.1)" h1 10.77.0.1 h2 10.77.0.2
  _slurm_start_munge || return 1 # one munged: its socket is a file, reachable from every host
  _slurm_start_ctld
  _slurm_start_d h1 on_host 1
  _slurm_start_d h2 on_host 2
  _slurm_wait_idle 2
}
slurm_netns=()

slurm_run() { "${slurm_where[@]}" env SLURM_CONF="$SLURM_CONF" "$@"; }

slurm_job_state() {
  slurm_run scontrol show job "$1" 2>/dev/null | sed -n 's/.*JobState=\([A-Z_]*\).*/\1/p' | head -1
}

slurm_wait_job() {
  local id="$1" secs="$2" state
  for _ in $(seq 1 $((secs * 5))); do
    state="$(slurm_job_state "$id")"
    case "$state" in
    PENDING | CONFIGURING | RUNNING | COMPLETING | "") ;;
    *) echo "$state"; return 0 ;;
    esac
    sleep 0.2
  done
  echo "TIMEOUT($state)"
  return 1
}

slurm_stop() {
  set +e
  local p
  # the cluster's own jobs first (only this cluster's: SLURM_CONF names it)
  [ -n "$slurm_dir" ] && timeout 10 "${slurm_where[@]}" env SLURM_CONF="$SLURM_CONF" \
    scancel --full --signal=KILL --user=root >/dev/null 2>&1 && sleep 1
  for p in "${slurm_pids[@]}"; do kill "$p" 2>/dev/null; done
  for _ in $(seq 1 75); do # 15 s: slurmd ends its steps first
    local alive=0
    for p in "${slurm_pids[@]}"; do kill -0 "$p" 2>/dev/null && alive=1; done
    [ "$alive" = 0 ] && break
    sleep 0.2
  done
  for p in "${slurm_pids[@]}"; do kill -9 "$p" 2>/dev/null; done
  # slurmstepd of a step still running (it outlives slurmd): found by our conf path
  for p in $(pgrep -f "slurmstepd" 2>/dev/null); do
    grep -qs "$slurm_dir" "/proc/$p/environ" && kill -9 "$p" 2>/dev/null
  done
  wait 2>/dev/null
  slurm_pids=()
  for p in "${slurm_netns[@]}"; do rm -rf "$p"; done
  slurm_netns=()
  [ -n "$slurm_dir" ] && [ -z "${PLAIT_SLURM_KEEP:-}" ] && rm -rf "$slurm_dir"
  return 0
}
