# Sourced by the ci/ scripts: what plait.spark is tested with (docs/spark.md).
#
#  - Debian's openjdk-17-jre-headless (Spark 4 needs Java 17 or later);
#  - the venv $PLAIT_CI_VENV_DIR/spark (ci/lib/python.sh sets the folder):
#    pyspark 4.0.1 from PyPI (Spark's jars included, about 450 MB), made with
#    --system-site-packages from Debian's /usr/bin/python3 (not the python3
#    first on PATH, which may be another one) so that it reuses Debian's
#    python3-torch 1.13 (ci/lib/python.sh installs it) instead of downloading
#    torch again; $PLAIT_SPARK_BASE_PYTHON names another base.
#    Created on first use and reused while it works.
source "$(dirname "${BASH_SOURCE[0]}")/venv.sh"
source "$(dirname "${BASH_SOURCE[0]}")/deps.sh"
PLAIT_SPARK_VERSION=4.0.1
PLAIT_SPARK_REQUIREMENTS=("pyspark==$PLAIT_SPARK_VERSION" cloudpickle numpy)
PLAIT_SPARK_DEBIAN_PACKAGES=(openjdk-17-jre-headless)

# Prints a JAVA_HOME holding bin/java, version 17 or later: $JAVA_HOME when it
# is one, else the java on PATH's, else Debian's java-17. Returns 1 when none.
plait_java_home() {
  local j
  for j in "${JAVA_HOME:-}" "$(dirname "$(dirname "$(readlink -f "$(command -v java 2>/dev/null || echo /nonexistent)")")")" \
      /usr/lib/jvm/java-17-openjdk-*; do
    [ -n "$j" ] && [ -x "$j/bin/java" ] || continue
    "$j/bin/java" -version 2>&1 | grep -qE 'version "(1[7-9]|[2-9][0-9])' || continue
    echo "$j"
    return 0
  done
  echo "ci: no Java 17 or later (JAVA_HOME, java on PATH, /usr/lib/jvm); install openjdk-17-jre-headless" >&2
  return 1
}

# Prints the Spark venv's python after making sure Java is there (and
# exports JAVA_HOME), creating or completing the venv when needed. Returns 1
# with the reason on stderr when it cannot.
plait_spark_python() {
  plait_ensure_packages "${PLAIT_SPARK_DEBIAN_PACKAGES[@]}" >&2 || return 1
  local jh
  jh="$(plait_java_home)" || return 1
  export JAVA_HOME="$jh"
  PLAIT_CI_VENV_PYTHON="${PLAIT_SPARK_BASE_PYTHON:-/usr/bin/python3}" \
    plait_venv --system-site-packages spark "pyspark $PLAIT_SPARK_VERSION from PyPI, 450 MB" \
    "import pyspark, cloudpickle, numpy, torch; assert pyspark.__version__ == '$PLAIT_SPARK_VERSION', pyspark.__version__" \
    "${PLAIT_SPARK_REQUIREMENTS[@]}"
}
