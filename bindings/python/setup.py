"""pip install for plait's Python package.

    PLAIT_LIB_DIR=build/lib pip install --no-index --no-build-isolation bindings/python

With PLAIT_LIB_DIR (a folder holding libplait.so and the transport plugins,
e.g. a build tree's lib/ or an installed prefix's lib/), the library and
plugins are copied into the package (plait/_lib) so that it works with no
other setting. Without it the package is pure Python and finds libplait
through PLAIT_LIBRARY or the system's library path (docs/python.md).
"""

import glob
import os
import re
import shutil

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = os.path.dirname(os.path.abspath(__file__))


def version():
    with open(os.path.join(HERE, "..", "..", "CMakeLists.txt")) as f:
        return re.search(r"project\(plait VERSION ([0-9.]+)", f.read()).group(1)


class BuildWithLibrary(build_py):
    def run(self):
        super().run()
        lib_dir = os.environ.get("PLAIT_LIB_DIR")
        if not lib_dir:
            return
        lib = os.path.join(lib_dir, "libplait.so")
        if not os.path.exists(lib):
            raise SystemExit("PLAIT_LIB_DIR=%s has no libplait.so (pip builds in %s, so "
                             "give an absolute path)" % (lib_dir, os.getcwd()))
        dest = os.path.join(self.build_lib, "plait", "_lib")
        os.makedirs(dest, exist_ok=True)
        # The real file under the name the package loads; plugins as they are.
        shutil.copy2(os.path.realpath(lib), os.path.join(dest, "libplait.so"))
        for plugin in glob.glob(os.path.join(lib_dir, "libplait-transport-*.so")):
            shutil.copy2(plugin, dest)
        # the framework adapters the build made (libplait_tensorflow.so,
        # libplait_mxnet.so): plait.common.library finds them here
        for adapter in glob.glob(os.path.join(lib_dir, "libplait_*.so")):
            shutil.copy2(adapter, dest)


setup(
    name="plait",
    version=version(),
    description="Collective communication for data-parallel training (Horovod's API)",
    packages=["plait", "plait.common", "plait.torch", "plait.torch.elastic", "plait.mxnet"],
    python_requires=">=3.8",
    cmdclass={"build_py": BuildWithLibrary},
    zip_safe=False,
)
