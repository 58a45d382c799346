# Sourced by the ci/ scripts: the venv plait.tensorflow is built and tested
# with, $PLAIT_CI_VENV_DIR/tf (ci/lib/python.sh sets the folder):
# tensorflow-cpu 2.21.0 from PyPI (Keras 3 as tf.keras) and pytest, then
# tf_keras 2.21.0 (Keras 2, TF_USE_LEGACY_KERAS=1) with --no-deps, because
# tf_keras's requirement on the full `tensorflow` package would otherwise
# install that over tensorflow-cpu (docs/tensorflow.md). Created on first use
# (about 1.6 GB, under a minute to install) and reused while it works.
source "$(dirname "${BASH_SOURCE[0]}")/venv.sh"
PLAIT_TF_REQUIREMENTS=("tensorflow-cpu==2.21.0" pytest cloudpickle)
PLAIT_TF_KERAS_REQUIREMENT="tf_keras==2.21.0"

# Prints the TensorFlow venv's python, creating or completing the venv when
# needed (ci/lib/venv.sh). Returns 1 with the reason on stderr when it cannot.
plait_tf_python() {
  plait_venv tf "tensorflow-cpu 2.21.0 and tf_keras from PyPI, 1.6 GB" \
    "import os; os.environ['TF_CPP_MIN_LOG_LEVEL']='3'; import tensorflow, tf_keras, pytest, cloudpickle; assert tensorflow.__version__ == '2.21.0', tensorflow.__version__" \
    "${PLAIT_TF_REQUIREMENTS[@]}" -- "$PLAIT_TF_KERAS_REQUIREMENT"
}
