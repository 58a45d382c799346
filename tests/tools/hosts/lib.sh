# Network-namespace hosts for the tests of tests/tools/hosts (sourced by
# run.sh and matrix.sh; not run on its own).
#
#   hosts_require            skips (77) with the reason without root, ip, unshare
#   hosts_make N             a switch and N hosts h1..hN: sets id, tmp, sw, nhosts;
#                            removes everything on exit (also after a failure)
#   hosts_shape_link2        tbf 200 Mbit/s (+ netem 2 ms delay) on host 2's link
#   on_host n CMD...         runs CMD on host n (its namespace, host name h<n>);
#                            ON_HOST_UNSHARE adds unshare options (e.g. --time)
#   pids+=(PID)              processes the exit handler kills
#   hosts_cleanup_hook       a function the caller may define: run first on exit
#
# Each run makes its own namespaces, named plait-<random>-*: a "switch"
# namespace with a bridge, and one namespace per host joined to it by a veth
# pair, addresses 10.77.0.<n>/24 (the project's own range, reachable only
# inside these namespaces, so parallel runs cannot collide). Host n's veth is
# eth0 inside it and pl<id>s<n> on the switch.

skip() { echo "SKIP: $*"; exit 77; }
die() { echo "FAIL: $*"; exit 1; }

hosts_require() {
  [ "$(id -u)" = 0 ] || skip "needs root to make network namespaces"
  command -v ip >/dev/null || skip "no 'ip' command (iproute2)"
  command -v unshare >/dev/null || skip "no 'unshare' (util-linux)"
  unshare --uts true 2>/dev/null || skip "cannot make a UTS namespace (unshare --uts) for the host names"
}

pids=()
nhosts=0

hosts_cleanup() {
  set +e
  if declare -F hosts_cleanup_hook >/dev/null; then hosts_cleanup_hook; fi
  for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null; done
  for n in $(seq 1 "$nhosts") sw; do
    local ns="plait-$id-h$n"
    [ "$n" = sw ] && ns="$sw"
    ip netns pids "$ns" 2>/dev/null | xargs -r kill -9 2>/dev/null
    ip netns del "$ns" 2>/dev/null
  done
  for n in $(seq 1 "$nhosts"); do ip link del "pl${id}s$n" 2>/dev/null; done
  wait 2>/dev/null
  rm -rf "$tmp"
}

hosts_make() {
  nhosts="$1"
  id="$(od -An -N3 -tx1 /dev/urandom | tr -d ' \n')"
  tmp="$(mktemp -d /tmp/plait-hosts-XXXXXX)"
  sw="plait-$id-sw"
  trap hosts_cleanup EXIT
  trap 'exit 130' INT TERM
  ip netns add "$sw" 2>"$tmp/err" || skip "cannot make a network namespace: $(cat "$tmp/err")"
  ip -n "$sw" link add br0 type bridge
  ip -n "$sw" link set br0 up
  local n ns
  for n in $(seq 1 "$nhosts"); do
    ns="plait-$id-h$n"
    ip netns add "$ns"
    ip link add "pl${id}h$n" type veth peer name "pl${id}s$n"
    ip link set "pl${id}h$n" netns "$ns"
    ip link set "pl${id}s$n" netns "$sw"
    ip -n "$ns" link set "pl${id}h$n" name eth0
    ip -n "$ns" addr add "10.77.0.$n/24" dev eth0
    ip -n "$ns" link set lo up
    ip -n "$ns" link set eth0 up
    ip -n "$sw" link set "pl${id}s$n" master br0
    ip -n "$sw" link set "pl${id}s$n" up
  done
}

# Shape host 2's link: bandwidth with tbf, delay with netem where it exists.
hosts_shape_link2() {
  if command -v tc >/dev/null; then
    if tc -n "plait-$id-h2" qdisc add dev eth0 root handle 1: netem delay 2ms 2>/dev/null; then
      tc -n "plait-$id-h2" qdisc add dev eth0 parent 1: handle 2: tbf rate 200mbit burst 64kb \
        latency 50ms && echo "link 2: netem delay 2 ms, tbf 200 Mbit/s"
    elif tc -n "plait-$id-h2" qdisc add dev eth0 root tbf rate 200mbit burst 64kb latency 50ms; then
      echo "link 2: tbf 200 Mbit/s (no delay: this kernel has no netem qdisc)"
    fi
  else
    echo "link 2: not shaped (no 'tc')"
  fi
}

# Runs a command on host n (its namespace, host name h<n>).
on_host() {
  local n="$1"; shift
  # shellcheck disable=SC2086 # ON_HOST_UNSHARE: several options
  ip netns exec "plait-$id-h$n" unshare --uts ${ON_HOST_UNSHARE:-} \
    sh -c 'hostname "$0"; exec "$@"' "h$n" "$@"
}
