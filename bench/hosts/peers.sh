# shellcheck shell=bash
# Open MPI and Horovod jobs on the network-namespace hosts of bench/hosts/hier.sh
# (sourced by it when PEERS is set; not run on its own).
#
#   peers_setup              builds bench/mpi_allreduce.c with mpicc and writes
#                            $tmp/bin/ssh, the remote shell both launchers use
#   peers_job MODE ROUND     MODE openmpi, openmpi_han or horovod: one job, the same message
#                            as plait's jobs (SIZE float32 allreduce, ITERS timed
#                            after 2 warm-up ones), its time in $tmp/MODE.ROUND.json
#                            as plait-bench's "time_s_median"
#
# Both launchers run on host 1 (mpirun, horovodrun) and start the ranks of the
# other hosts through $tmp/bin/ssh HOST COMMAND: `ip netns exec` into that
# host's namespace (host 10.77.0.<n> is host n), COMMAND run by bash as ssh's
# remote shell would. The host name there is the address: Horovod's gloo
# looks its own host name up (getaddrinfo) and crashes (SIGSEGV in
# lookupAddrForHostname) where it does not resolve, as h<n> does not. mpirun takes it as plm_rsh_agent;
# horovodrun calls `ssh` by name, so it is first in the job's PATH. Open MPI:
# its own shared memory (vader) within a host, tcp over eth0 across; ranks
# placed like plait's (PLACEMENT=cyclic: --map-by node); openmpi_han: the
# same with Open MPI's hierarchical collectives (coll/han, priority 100:
# within the node, then across nodes), where openmpi is its default (tuned). Horovod 0.28.1 (the
# horovod venv) over gloo, bench/horovod_bench.py's "large" workload;
# horovodrun places ranks by host, so Horovod runs block-placed whatever
# PLACEMENT says (its row in the summary says so).

hvd_venv="${HOROVOD_VENV:-$HOME/.cache/plait/venvs/horovod}"

peers_setup() {
  if ! command -v mpirun >/dev/null || ! command -v mpicc >/dev/null; then
    die "PEERS needs mpirun and mpicc (Open MPI)"
  fi
  [ -x "$hvd_venv/bin/horovodrun" ] || die "PEERS needs Horovod: no $hvd_venv/bin/horovodrun"
  mpicc -O2 -o "$tmp/mpi_allreduce" "$root/bench/mpi_allreduce.c" || die "mpicc bench/mpi_allreduce.c failed"
  mkdir -p "$tmp/bin"
  cat >"$tmp/bin/ssh" <<EOF
#!/bin/sh
# ssh [OPTION]... HOST [OPTION]... COMMAND...: COMMAND on namespace host HOST
# (options, which horovodrun also puts after HOST, are ignored)
host=""
while [ \$# -gt 0 ]; do
  case "\$1" in
    -o|-p|-i|-l) shift 2 ;;
    -*) shift ;;
    *) [ -z "\$host" ] || break; host="\$1"; shift ;;
  esac
done
exec ip netns exec "plait-$id-h\${host##*.}" unshare --uts bash -c 'hostname "\$0"; exec bash -c "\$1"' "\$host" "\$*"
EOF
  chmod +x "$tmp/bin/ssh"
}

# The -H list of both launchers: 10.77.0.1:2,10.77.0.2:2,...
peers_hosts() {
  local n list=""
  for n in $(seq 1 "$nh"); do list="$list${list:+,}10.77.0.$n:2"; done
  echo "$list"
}

# Runs a command on host 1 as the launchers' ssh would (host name 10.77.0.1).
peers_on_host1() {
  "$tmp/bin/ssh" 10.77.0.1 "$(printf '%q ' "$@")"
}

peers_openmpi() { # json out [mpirun options]
  local map=("${@:3}")
  [ "$placement" = block ] || map+=(--map-by node)
  peers_on_host1 timeout 600 mpirun --allow-run-as-root -np $((nh * 2)) -H "$(peers_hosts)" "${map[@]}" \
    --bind-to none --mca plm_rsh_agent "$tmp/bin/ssh" --mca plm_rsh_no_tree_spawn 1 \
    --mca oob_tcp_if_include eth0 --mca btl_tcp_if_include eth0 --mca btl self,vader,tcp \
    "$tmp/mpi_allreduce" --min "$size" --max "$size" --iters "$iters" --many 1x4096 --steps 1 \
    --json "$1.raw" >"$2" 2>&1 || return 1
  python3 - "$1.raw" >"$1" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
print(json.dumps([r for r in rows if r.get("kind") == "collective"][-1]))
PY
}

peers_openmpi_han() { # json out
  peers_openmpi "$1" "$2" --mca coll_han_priority 100
}

peers_horovod() { # json out
  peers_on_host1 env PATH="$tmp/bin:$hvd_venv/bin:$PATH" OMP_NUM_THREADS=1 \
    timeout 600 "$hvd_venv/bin/horovodrun" -np $((nh * 2)) -H "$(peers_hosts)" --gloo \
    --network-interface eth0 --start-timeout 120 \
    python "$root/bench/horovod_bench.py" --impl horovod --workloads large --threads 1 \
    --large-bytes "$(numfmt --from=iec "$size")" \
    --large-steps "$iters" --warmup 2 --json "$1.raw" >"$2" 2>&1 || return 1
  python3 - "$1.raw" >"$1" <<'PY'
import json, sys
r = [json.loads(l) for l in open(sys.argv[1]) if l.strip()][-1]
r.update(time_s_median=r["median_s"], transport="gloo", placement="block")
print(json.dumps(r))
PY
}

peers_job() { # mode round
  local mode="$1" round="$2" json="$tmp/$1.$2.json" out="$tmp/out.$1.$2"
  cd "$root" || exit 1
  "peers_$mode" "$json" "$out" || { head -60 "$out"; echo "FAIL: the $mode job of round $round"; exit 1; }
  grep -h "median\|MPI_Allreduce" "$out" | tail -2
}
