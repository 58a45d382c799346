"""An elastic worker run through a start agent (plait.ray.elastic, plait.spark.run_elastic): runs the user's function.

    python -m plait.common.worker_main      (plaitrun starts it, through plait.ray.agent or plait.spark.agent)

Reads the pickled (function, args, kwargs, the driver's plait version) from
$PLAITRAY_WORKER_DIR/fn.pkl (a private folder the relay actor made on this
node), refuses to run with another plait version than the driver's (exit 1,
naming both), calls the function, and writes
(rank, value) to result.pkl there when it returns; the relay sends it back to
the driver's machine. An exception is printed and the worker exits 1 (a
failed worker to plaitrun's driver). A worker the driver has no place for
exits 0 inside plait.init, with no result.
"""
import os
import pickle
import sys
import traceback

from plait.common.relay import FUNCTION, RESULT


def _dumps(value):
    try:
        import cloudpickle
    except ImportError:
        from ray import cloudpickle
    return cloudpickle.dumps(value)


def _rank():
    """This worker's rank in the job it ended in, or None."""
    core = sys.modules.get("plait._core")
    try:
        return core.rank() if core is not None and core.is_initialized() else None
    except Exception:
        return None


def main():
    folder = os.environ.get("PLAITRAY_WORKER_DIR")
    if not folder:
        sys.stderr.write("plait.common.worker_main: PLAITRAY_WORKER_DIR is not set: start it "
                         "through plait.ray.ElasticRayExecutor\n")
        return 2
    with open(os.path.join(folder, FUNCTION), "rb") as f:
        fn, args, kwargs, driver_version = pickle.load(f)
    os.unlink(os.path.join(folder, FUNCTION))  # read once; not left on the node
    import plait
    if plait.__version__ != driver_version:
        sys.stderr.write("plait.common.worker_main: plait version mismatch: the driver runs plait %s, "
                         "this worker on %s runs %s (%s)\n"
                         % (driver_version, os.uname().nodename, plait.__version__,
                            plait.library_path))
        return 1
    try:
        value = fn(*args, **kwargs)
    except SystemExit:
        raise
    except BaseException:
        traceback.print_exc()
        sys.stderr.flush()
        return 1
    data = _dumps((_rank(), value))
    with open(os.path.join(folder, RESULT + ".tmp"), "wb") as f:
        f.write(data)
    os.replace(os.path.join(folder, RESULT + ".tmp"), os.path.join(folder, RESULT))
    return 0


if __name__ == "__main__":
    sys.exit(main())
