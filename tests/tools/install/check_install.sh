#!/usr/bin/env bash
# Installs the build into a fresh prefix and checks what a user gets:
# find_package(plait) and pkg-config both build a program that runs; the
# installed plaitrun runs 2 ranks that find the installed plugins (the default,
# PLAIT_TRANSPORT=auto, takes ofi where it was installed, else gloo), and the
# installed plait-bench under it; the
# installed libplait exports only plait_* symbols.
set -euo pipefail
build="$1"; src="$2"
prefix="$(mktemp -d)"; work="$(mktemp -d)"
trap 'rm -rf "$prefix" "$work"' EXIT
cmake --install "$build" --prefix "$prefix" >/dev/null
libdir="$(dirname "$(find "$prefix" -name libplait.so | head -1)")"
for f in include/plait/plait.h include/plait/transport.h include/plait/transport_common.h \
    include/plait/transport_v1.h include/plait/transport_v2.h include/plait/dtypes.h bin/plaitrun \
    bin/plait-bench; do
  [ -e "$prefix/$f" ] || { echo "missing after install: $f"; exit 1; }
done
for f in libplait.so plait.pc cmake/plait/plaitConfig.cmake; do
  [ -n "$(find "$prefix" -path "*$f" | head -1)" ] || { echo "missing after install: $f"; exit 1; }
done
bad="$(nm -D --defined-only "$libdir/libplait.so" | awk '$2 ~ /^[TDBR]$/ {print $3}' | grep -v '^plait_' || true)"
[ -z "$bad" ] || { echo "installed libplait exports non-plait symbols: $bad"; exit 1; }

# PLAIT_TRANSPORT unset: auto, which finds the plugins beside the installed libplait
want=gloo
[ -e "$libdir/libplait-transport-ofi.so" ] && want=ofi
unset PLAIT_TRANSPORT

# find_package(plait)
cmake -S "$src/tests/tools/install/consumer" -B "$work/cm" -G Ninja -DCMAKE_PREFIX_PATH="$prefix" >/dev/null
cmake --build "$work/cm" >/dev/null
env -u PLAIT_PLUGIN_PATH LD_LIBRARY_PATH="$libdir" "$work/cm/consumer" | tee "$work/out1"
grep -q "consumer: rank 0 of 1 over $want" "$work/out1"

# pkg-config
PKG_CONFIG_PATH="$libdir/pkgconfig" cc -std=c11 -Wall -Werror "$src/tests/tools/install/consumer/main.c" \
  $(PKG_CONFIG_PATH="$libdir/pkgconfig" pkg-config --cflags --libs plait) -o "$work/pc"
env -u PLAIT_PLUGIN_PATH LD_LIBRARY_PATH="$libdir" "$work/pc" | grep -q "over $want"

# the installed launcher, 2 ranks, plugins found beside the installed libplait
env -u PLAIT_PLUGIN_PATH LD_LIBRARY_PATH="$libdir" "$prefix/bin/plaitrun" -np 2 "$work/cm/consumer" | sort | tee "$work/out2"
grep -q "^\[0\]: consumer: rank 0 of 2 over $want" "$work/out2"
grep -q "^\[1\]: consumer: rank 1 of 2 over $want" "$work/out2"
# the installed plait-bench, on its own RPATH, under the installed launcher
env -u PLAIT_PLUGIN_PATH -u LD_LIBRARY_PATH "$prefix/bin/plaitrun" -np 2 "$prefix/bin/plait-bench" \
  allreduce --min 4K --max 4K --iters 2 | tee "$work/out3"
grep -q "4 KiB .* ok " "$work/out3"
# and Gloo by name
env -u PLAIT_PLUGIN_PATH PLAIT_TRANSPORT=gloo LD_LIBRARY_PATH="$libdir" "$work/cm/consumer" |
  grep -q "consumer: rank 0 of 1 over gloo"
echo "install check passed ($prefix)"
