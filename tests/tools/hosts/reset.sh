#!/usr/bin/env bash
# The reset test (tests/faults/reset/reset_cycles.c) with its peers on another
# host: the survivor on h1, every peer on h2 in a pid namespace of its own, so
# the survivor can check neither their pids nor their processes, only the
# network (issue 38 item 1: an rxm endpoint broken by a stopped peer on
# another host).
#
#   tests/tools/hosts/reset.sh CYCLES [reset_cycles options...]   (ctest: hosts_reset_*)
#
# Env: RESET_CYCLES (path; ctest sets it). Needs root and iproute2; skipped
# (77) with the reason without them. Exit status: reset_cycles's.
set -euo pipefail
cycles="${1:?cycles}"
shift
: "${RESET_CYCLES:?path of reset_cycles}"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=lib.sh
. "$here/lib.sh"
hosts_require
hosts_make 2
# the tcp provider on eth0: lo would give each host the same address
on_host 1 env FI_TCP_IFACE=eth0 "$RESET_CYCLES" --cycles "$cycles" "$@" \
  --away "plait-$id-h2" 10.77.0.1 10.77.0.2
