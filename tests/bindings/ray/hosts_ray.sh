#!/usr/bin/env bash
# plait.ray across two network-namespace hosts (tests/tools/hosts/lib.sh):
# one Ray node per host (h1 10.77.0.1 the head, h2 10.77.0.2), the driver on
# h1, then test_ray_executor.py's CASES (default: the 2 hosts x 2 workers
# job and a worker SIGKILLed mid-job) on that cluster.
#   tests/bindings/ray/hosts_ray.sh PYTHON [CASE...]
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
source "$HERE/../../tools/hosts/lib.sh"
[ $# -ge 1 ] || { sed -n 2,6p "$0"; exit 2; }
PY=$1; shift
[ $# -gt 0 ] || set -- two_hosts_two_each actor_sigkilled_mid_job
hosts_require
hosts_make 2
PLAIT_RAY_TEST_NETNS="plait-$id-h1 plait-$id-h2" PLAIT_RAY_TEST_IPS="10.77.0.1 10.77.0.2" \
  on_host 1 "$PY" "$HERE/test_ray_executor.py" "$@"
