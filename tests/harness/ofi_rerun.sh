#!/bin/bash
# A coordinator-level suite re-run on the ofi transport (tests/CMakeLists.txt):
#   ofi_rerun.sh PROBE TEST [ARGS...]
# PROBE (ofi_probe) first asks whether the provider in FI_PROVIDER can start
# here. Only its "no libfabric provider offers ..." verdict skips the re-run
# (exit 77, the reason printed); otherwise TEST runs and its exit status is
# the result, whatever its output says.
probe=$1
shift
"$probe"
rc=$?
if [ "$rc" -eq 77 ]; then
  echo "ofi_rerun: skipped: FI_PROVIDER=${FI_PROVIDER:-(unset)} cannot start here (above)"
  exit 77
fi
if [ "$rc" -ne 0 ]; then
  echo "ofi_rerun: the probe failed (exit $rc): the ofi transport does not start" >&2
  exit "$rc"
fi
exec "$@"
