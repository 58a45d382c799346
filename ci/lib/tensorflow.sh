# Sourced by the ci/ scripts: the venv plait.tensorflow is built and tested
# with, $PLAIT_CI_VENV_DIR/tf (ci/lib/python.sh sets the folder):
# tensorflow-cpu 2.21.0 from PyPI (Keras 3 as tf.keras) and pytest, then
# tf_keras 2.21.0 (Keras 2, TF_USE_LEGACY_KERAS=1) with --no-deps, because
# tf_keras's requirement on the full `tensorflow` package would otherwise
# install that over tensorflow-cpu (docs/tensorflow.md). Created on first use
# (about 1.6 GB, under a minute to install) and reused while it works.
PLAIT_TF_REQUIREMENTS=("tensorflow-cpu==2.21.0" pytest)
PLAIT_TF_KERAS_REQUIREMENT="tf_keras==2.21.0"

# Prints the TensorFlow venv's python, creating the venv when missing or
# broken. Progress goes to stderr; returns 1 (with the reason) when it cannot.
plait_tf_python() {
  local dir="$PLAIT_CI_VENV_DIR/tf" base="${PLAIT_CI_VENV_PYTHON:-python3}"
  local check="import os; os.environ['TF_CPP_MIN_LOG_LEVEL']='3'; import tensorflow, tf_keras, pytest; assert tensorflow.__version__ == '2.21.0', tensorflow.__version__"
  if [ -x "$dir/bin/python" ] && "$dir/bin/python" -c "$check" 2>/dev/null; then
    echo "$dir/bin/python"
    return 0
  fi
  echo "ci: creating $dir (tensorflow-cpu 2.21.0 and tf_keras from PyPI, 1.6 GB; about a minute)" >&2
  rm -rf "$dir"
  if ! "$base" -m venv "$dir" >&2; then
    echo "ci: $base cannot create a venv (python3 -m venv failed)" >&2
    return 1
  fi
  if ! "$dir/bin/pip" install -q --disable-pip-version-check "${PLAIT_TF_REQUIREMENTS[@]}" >&2; then
    echo "ci: pip could not install ${PLAIT_TF_REQUIREMENTS[*]} into $dir" >&2
    return 1
  fi
  if ! "$dir/bin/pip" install -q --disable-pip-version-check --no-deps "$PLAIT_TF_KERAS_REQUIREMENT" >&2; then
    echo "ci: pip could not install $PLAIT_TF_KERAS_REQUIREMENT into $dir" >&2
    return 1
  fi
  if ! "$dir/bin/python" -c "$check" >&2; then
    echo "ci: $dir was installed but cannot import tensorflow 2.21.0, tf_keras and pytest" >&2
    return 1
  fi
  echo "$dir/bin/python"
}
