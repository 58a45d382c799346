"""plait on Ray: horovod.ray 0.28.1's API (docs/ray.md).

    from plait.ray import RayExecutor, ElasticRayExecutor

Names are imported on first use, so `import plait.ray` works without Ray
installed and says what is missing only when a name is used.
"""
import importlib

_NAMES = {
    "RayExecutor": "plait.ray.runner",
    "ElasticRayExecutor": "plait.ray.elastic",
}

__all__ = sorted(_NAMES)


def __getattr__(name):
    module = _NAMES.get(name)
    if module is None:
        raise AttributeError("module 'plait.ray' has no attribute %r" % name)
    return getattr(importlib.import_module(module), name)
