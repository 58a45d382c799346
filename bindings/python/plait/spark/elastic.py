"""plait.spark.run_elastic: not provided yet (docs/spark.md)."""


def run_elastic(fn, args=(), kwargs={}, num_proc=None, min_np=None, max_np=None,
                start_timeout=None, elastic_timeout=None, reset_limit=None, env=None,
                verbose=1, **_more):
    """horovod.spark.run_elastic's signature; refuses by name."""
    raise NotImplementedError(
        "plait.spark.run_elastic is not provided: it needs a start agent that runs "
        "plaitrun's elastic workers inside long-running Spark tasks, which is not written "
        "yet. Use plait.spark.run (fixed size, fails clearly when a rank is lost), or "
        "plaitrun --min-np/--max-np with a --host-discovery-script on the cluster's hosts, "
        "or plait.ray's ElasticRayExecutor (docs/spark.md, docs/elastic.md)")
