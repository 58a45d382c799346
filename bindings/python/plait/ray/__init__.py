"""plait on Ray: horovod.ray 0.28.1's API (docs/ray.md).

    from plait.ray import RayExecutor, ElasticRayExecutor

Names are imported on first use, so `import plait.ray` works without Ray
installed and says what is missing only when a name is used.
"""
from plait.common.lazy import lazy_getattr

_NAMES = {
    "RayExecutor": "plait.ray.runner",
    "ElasticRayExecutor": "plait.ray.elastic",
}

__all__ = sorted(_NAMES)

__getattr__ = lazy_getattr('plait.ray', _NAMES)
