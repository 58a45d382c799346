"""The Ray driver of one test job (tests/ray_elastic/scenarios.py runs it
with Ray's python): ElasticRayExecutor running examples/elastic_torch.py's
training as the worker function, on the Ray cluster at --address.

Prints "RESULTS <repr>" (the values run returned) and exits 0, or prints
"ERROR <type>: <message>" and exits 1.
"""
import argparse
import importlib.util
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
EXAMPLE = os.path.join(os.path.dirname(os.path.dirname(HERE)), "examples", "elastic_torch.py")


def train(example, train_args):
    """The worker function: the example's elastic training; returns
    (its status, the worker's final rank)."""
    spec = importlib.util.spec_from_file_location("elastic_torch", example)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    rc = mod.elastic(mod.parser.parse_args(train_args))
    import plait.torch as hvd
    return rc, hvd.rank()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--address", required=True)
    ap.add_argument("--min-np", type=int, default=1)
    ap.add_argument("--max-np", type=int)
    ap.add_argument("--elastic-timeout", type=int, default=60)
    ap.add_argument("--timeout-s", type=int, default=30)
    ap.add_argument("train", nargs=argparse.REMAINDER, help="elastic_torch.py's arguments")
    args = ap.parse_args()
    import ray
    from plait.ray import ElasticRayExecutor
    try:
        if args.address != "-":  # "-": let start() connect (RAY_ADDRESS)
            ray.init(address=args.address, logging_level="ERROR")
        settings = ElasticRayExecutor.create_settings(
            min_np=args.min_np, max_np=args.max_np, elastic_timeout=args.elastic_timeout,
            timeout_s=args.timeout_s)
        executor = ElasticRayExecutor(settings, cpus_per_slot=1)
        executor.start()
        try:
            results = executor.run(train, args=(EXAMPLE, args.train[1:] if args.train[:1] == ["--"]
                                                else args.train))
        finally:
            executor.shutdown()
    except Exception as e:
        print("ERROR %s: %s" % (type(e).__name__, e), flush=True)
        return 1
    print("RESULTS %r" % (results,), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
