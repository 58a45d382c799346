"""plait on Spark: horovod.spark 0.28.1's run and run_elastic (docs/spark.md).

    import plait.spark
    results = plait.spark.run(fn, args=(...), num_proc=4)
    results = plait.spark.run_elastic(train, num_proc=4, min_num_proc=2)

run: one plait rank per Spark task, in barrier execution mode. run_elastic:
plaitrun's elastic driver, its workers started by long-running Spark tasks.
Names are imported on first use, so `import plait.spark` works without
pyspark installed and says what is missing only when a name is used.
"""
from plait.common.lazy import lazy_getattr

_NAMES = {
    "run": "plait.spark.runner",
    "run_elastic": "plait.spark.elastic",
    "SparkJobError": "plait.spark.runner",
}

__all__ = sorted(_NAMES)

__getattr__ = lazy_getattr('plait.spark', _NAMES)
