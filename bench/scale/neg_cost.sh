#!/usr/bin/env bash
# Rank 0's negotiation instructions per cached operation under the control
# tree (fan-out K), recorded once per subtree (cover) and rank by rank
# (by-rank, as before), at each RANKS: bench/scale/neg_cost.c under
# callgrind with OPS1 and OPS2 operations, (Ir(OPS2) - Ir(OPS1)) / (OPS2 -
# OPS1), so start-up cancels out. Prints one JSON record per point.
#
#   bench/scale/neg_cost.sh BUILD_DIR [RANKS...]    (default 64 256 1024 4096)
# Environment: NEG_COST_K (8), NEG_COST_OPS1/OPS2 (20/60).
set -euo pipefail
[ $# -ge 1 ] || { sed -n 2,10p "$0"; exit 2; }
BIN=$(realpath "$1")/bin/neg_cost; shift
RANKS=${*:-64 256 1024 4096}
K=${NEG_COST_K:-8}; O1=${NEG_COST_OPS1:-20}; O2=${NEG_COST_OPS2:-60}
TMP=$(mktemp -d); trap 'rm -rf "$TMP"' EXIT
ir() { # MODE RANKS OPS -> total instructions
  valgrind --tool=callgrind --callgrind-out-file="$TMP/cg" "$BIN" "$1" "$2" "$3" "$K" >/dev/null \
    2>"$TMP/err" || { cat "$TMP/err" >&2; exit 1; }
  sed -n 's/^summary: //p' "$TMP/cg"
}
for n in $RANKS; do
  for mode in cover by-rank; do
    a=$(ir "$mode" "$n" "$O1"); b=$(ir "$mode" "$n" "$O2")
    echo "{\"kind\": \"neg_cost\", \"mode\": \"$mode\", \"ranks\": $n, \"fanout\": $K," \
         "\"ir_per_op\": $(( (b - a) / (O2 - O1) )), \"ops\": [$O1, $O2]}"
  done
done
