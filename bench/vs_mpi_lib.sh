# Sourced by bench/latency_vs_mpi.sh and bench/small_vs_mpi.sh (goals 1 and 2 side by
# side with Open MPI): with $py set (the torch venv's python), it makes $tmp (removed at
# exit), builds Open MPI's side, $tmp/mpi_allreduce (bench/mpi_allreduce.c), installs
# mpi4py into $py's venv when it is missing, and defines:
#   mpirun_ N CMD...             mpirun of CMD on N ranks (oversubscribed, unbound, 300 s)
#   mpi4py_median N UNIT ARGS... bench/mpi4py_bench.py ARGS on N ranks: its median in UNIT
#                                (us or ms), or "- (why)" when it did not run
#   vs_mpi_head TEXT             the output's first two lines
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
command -v mpicc >/dev/null || { echo "mpicc not found (Debian: openmpi-bin libopenmpi-dev)" >&2; exit 2; }
mpicc -O2 -o "$tmp/mpi_allreduce" bench/mpi_allreduce.c
# mpi4py for Open MPI from Python: a wheel that loads Debian's libmpi (a row says
# why where it cannot run)
"$py" -c 'import mpi4py' 2>/dev/null || "$py" -m pip install -q mpi4py >&2 || true
mpirun_() { timeout 300 mpirun --allow-run-as-root --oversubscribe -np "$1" --bind-to none "${@:2}"; }
mpi4py_median() {
  local line
  line="$(mpirun_ "$1" "$py" bench/mpi4py_bench.py "${@:3}" 2>&1 | tail -1)"
  case "$line" in
    *"median "*) sed "s/.*median \([0-9.]*\) $2.*/\1/" <<<"$line" ;;
    *) echo "- (mpi4py did not run: $line)" ;;
  esac
}
# vs_mpi_head TEXT: the run's first lines: when, where and how loaded; the commit, and TEXT
vs_mpi_head() {
  echo "# $(date -u +%FT%TZ) $(uname -r), $(nproc) CPUs, load average $(cut -d' ' -f1-3 /proc/loadavg)"
  echo "# $(git rev-parse --short HEAD 2>/dev/null || echo '?'); $1"
}
