"""Whether this interpreter can run the Python suite (tests/bindings/CMakeLists.txt).

    python require.py [--optional]

Exit 0 when torch and pytest import. When one of them is not installed:
exit 77 (ctest's skip code) with --optional, the interpreter ctest picked by
itself; exit 1 without, an interpreter named in PLAIT_TEST_PYTHONS, which
was asked for and must work. Installed but broken (the import raises): exit
1 either way. The reason is printed.
"""
import importlib.util
import sys

missing = [m for m in ("torch", "pytest") if importlib.util.find_spec(m) is None]
if missing:
    print("%s has no %s: the Python suite cannot run with it" % (sys.executable, " and ".join(missing)))
    sys.exit(77 if "--optional" in sys.argv[1:] else 1)
import pytest  # noqa: E402,F401 - a broken install fails here, loudly
import torch  # noqa: E402,F401
print("%s: torch %s, pytest %s" % (sys.executable, torch.__version__, pytest.__version__))
