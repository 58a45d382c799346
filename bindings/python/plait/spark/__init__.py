"""plait on Spark: horovod.spark 0.28.1's run API (docs/spark.md).

    import plait.spark
    results = plait.spark.run(fn, args=(...), num_proc=4)

One plait rank per Spark task, in barrier execution mode. Names are imported
on first use, so `import plait.spark` works without pyspark installed and
says what is missing only when a name is used.
"""
from plait.common.lazy import lazy_getattr

_NAMES = {
    "run": "plait.spark.runner",
    "run_elastic": "plait.spark.elastic",
    "SparkJobError": "plait.spark.runner",
}

__all__ = sorted(_NAMES)

__getattr__ = lazy_getattr('plait.spark', _NAMES)
