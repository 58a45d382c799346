"""Finding plait's native libraries: libplait.so itself (plait._core) and the
framework adapters beside it (libplait_tensorflow.so, libplait_mxnet.so),
all looked up the same way, in order:

1. the environment variable that names the file (PLAIT_LIBRARY,
   PLAIT_TENSORFLOW_LIBRARY, PLAIT_MXNET_LIBRARY): only there when set;
2. an adapter: beside the libplait this process loaded (the build tree's
   lib/ and the installed libdir both hold every library);
3. bundled with the package (plait/_lib, where pip install puts them);
4. installed with the package (plait/_install_paths.py, by cmake --install);
5. libplait only: the system's library path.

Imports nothing of plait (plait._core uses it while it loads).
"""

import ctypes.util
import os

__all__ = ["candidates", "load"]

_PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def candidates(file_name, env_var, beside=None, system=None):
    """Where file_name is looked up, in order, as (path, why) pairs. beside:
    a library whose folder comes first (libplait's path, for an adapter);
    system: the name ctypes.util.find_library knows it by ("plait")."""
    env = os.environ.get(env_var, "")
    if env:
        return [(env, env_var)]
    found = []
    if beside:
        found.append((os.path.join(os.path.dirname(os.path.realpath(beside)), file_name),
                      "beside %s" % beside))
    found.append((os.path.join(_PACKAGE, "_lib", file_name), "bundled with the package"))
    try:  # written by cmake --install
        from plait._install_paths import LIBRARY_DIR_RELATIVE
        found.append((os.path.normpath(os.path.join(_PACKAGE, LIBRARY_DIR_RELATIVE, file_name)),
                      "installed with the package"))
    except ImportError:
        pass
    if system:
        path = ctypes.util.find_library(system)
        if path:
            found.append((path, "the system's library path"))
    return found


def load(file_name, env_var, open_fn, errors, who, advice, what=None, beside=None, system=None):
    """(open_fn(path), path) for the first candidate that opens. errors: the
    exception classes open_fn raises for a library it cannot load. A path
    with a folder that does not exist is noted and skipped; the variable's
    path, when set, is the only one tried. ImportError names every path
    tried and why it failed: "<who>: cannot load <file>; tried: ... <advice>"."""
    tried = []
    for path, why in candidates(file_name, env_var, beside, system):
        if os.path.sep in path and not os.path.exists(path):
            tried.append("%s (%s): no such file" % (path, why))
            continue
        try:
            return open_fn(path), path
        except errors as e:
            tried.append("%s (%s): %s" % (path, why, e))
    raise ImportError("%s: cannot load %s; tried:\n  %s\n%s"
                      % (who, what or file_name, "\n  ".join(tried), advice))
