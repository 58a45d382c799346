#!/usr/bin/env python3
"""Runs the same MXNet operations with horovod.mxnet or plait.mxnet and saves
every output (and the class and place of every failure) per rank, so the two
can be compared bit for bit. Not part of ctest: it needs Horovod built with
MXNet. docs/mxnet.md says how to run it and what it found:

    horovodrun -np 2 -H localhost:2 --gloo HVD_PYTHON horovod_mx_numerics.py --impl horovod --out D
    plaitrun -np 2 MX_PYTHON horovod_mx_numerics.py --impl plait --out D
    python3 horovod_mx_numerics.py --compare D
"""

import argparse
import glob
import os
import pickle
import sys
import warnings

import numpy as np

warnings.simplefilter("ignore")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

DTYPES = ["float32", "float64", "float16", "uint8", "int8", "int32", "int64", "bool"]


def run(impl, out):
    import mxnet as mx
    from mxutil import rank_values
    if impl == "horovod":
        import horovod.mxnet as hvd
    else:
        import plait.mxnet as hvd
    hvd.init()
    r, n = hvd.rank(), hvd.size()
    res = {}

    def record(key, fn):
        try:
            v = fn()
            if isinstance(v, tuple):
                res[key] = tuple(x.asnumpy() for x in v)
            else:
                res[key] = v.asnumpy() if v is not None else None
        except Exception as e:  # noqa: BLE001
            res[key] = ("ERROR", [c.__name__ for c in type(e).__mro__], str(e)[:300])

    ops = {"Sum": hvd.Sum, "Average": hvd.Average, "Min": hvd.Min, "Max": hvd.Max,
           "Product": hvd.Product}
    for d in DTYPES:
        for oname, op in ops.items():
            x = mx.nd.array(np.asarray(rank_values(r, (3, 5), d)).astype(d), dtype=d)
            record("allreduce.%s.%s" % (d, oname),
                   lambda: hvd.allreduce(x, op=op, name="ar.%s.%s" % (d, oname)))
        for pre, post in [(2.5, 0.5), (0.3, 3.0)]:
            x = mx.nd.array(np.asarray(rank_values(r, (7,), d)).astype(d), dtype=d)
            record("scaled.%s.%g.%g" % (d, pre, post),
                   lambda: hvd.allreduce(x, op=hvd.Sum, prescale_factor=pre,
                                         postscale_factor=post, name="sc.%s.%g" % (d, pre)))
        x = mx.nd.array(np.asarray(rank_values(r, (r + 1, 2), d)).astype(d), dtype=d)
        record("allgather.%s" % d, lambda: hvd.allgather(x, name="ag." + d))
        x = mx.nd.array(np.asarray(rank_values(r, (2, 3), d)).astype(d), dtype=d)
        record("broadcast.%s" % d, lambda: hvd.broadcast(x, n - 1, name="bc." + d))
        x = mx.nd.array(np.asarray(rank_values(r, (2 * n + 1, 2), d)).astype(d), dtype=d)
        for oname in ("Sum", "Average"):
            record("reducescatter.%s.%s" % (d, oname),
                   lambda: hvd.reducescatter(x, op=ops[oname], name="rs.%s.%s" % (d, oname)))
        x = mx.nd.array(np.stack([np.asarray(rank_values(r, (2,), d))] * 3 * n).astype(d),
                        dtype=d)
        record("alltoall.%s" % d,
               lambda: hvd.alltoall(x, splits=[q + 1 for q in range(n - 1)] + [3 * n - sum(
                   q + 1 for q in range(n - 1))], name="a2a." + d))
    # Training
    from mxnet import autograd, gluon
    mx.random.seed(7)
    net = gluon.nn.Dense(3, in_units=4)
    net.initialize(mx.init.Xavier())
    hvd.broadcast_parameters(net.collect_params(), root_rank=0)
    tr = hvd.DistributedTrainer(net.collect_params(), "sgd",
                                {"learning_rate": 0.1, "momentum": 0.9},
                                gradient_predivide_factor=2.0)
    rng = np.random.RandomState(r)
    for s in range(3):
        with autograd.record():
            loss = (net(mx.nd.array(rng.randn(5, 4))) ** 2).sum()
        loss.backward()
        tr.step(5)
    for k, p in sorted(net.collect_params().items()):
        res["trainer." + k.split("_", 1)[-1]] = p.data().asnumpy()
    # Failures
    record("err.mismatch", lambda: hvd.allreduce(mx.nd.ones((3 + r,)), name="mm"))
    record("err.root", lambda: hvd.broadcast(mx.nd.ones((3,)), n + 3, name="badroot"))
    record("err.bool_average", lambda: hvd.allreduce(mx.nd.ones((3,), dtype="bool"),
                                                     op=hvd.Average, name="boolavg"))
    record("err.reducescatter_max", lambda: hvd.reducescatter(mx.nd.ones((4,)), op=hvd.Max))
    record("ok.after", lambda: hvd.allreduce(mx.nd.ones((2,)), op=hvd.Sum, name="after"))
    mx.nd.waitall() if impl == "plait" else None
    with open(os.path.join(out, "%s.rank%d.pkl" % (impl, r)), "wb") as f:
        pickle.dump(res, f)
    hvd.shutdown()


def compare(out):
    same, diff = 0, []
    for path in sorted(glob.glob(os.path.join(out, "horovod.rank*.pkl"))):
        h = pickle.load(open(path, "rb"))
        p = pickle.load(open(path.replace("horovod.", "plait."), "rb"))
        for k in sorted(set(h) | set(p)):
            a, b = h.get(k, "MISSING"), p.get(k, "MISSING")
            if isinstance(a, np.ndarray) and isinstance(b, np.ndarray):
                ok = a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()
            elif isinstance(a, tuple) and a and isinstance(a[0], np.ndarray):
                ok = isinstance(b, tuple) and all(
                    x.dtype == y.dtype and x.tobytes() == y.tobytes() for x, y in zip(a, b))
            else:
                ok = False
            if ok:
                same += 1
            else:
                diff.append((os.path.basename(path), k, a, b))
    for f, k, a, b in diff:
        print("DIFF %s %s\n  horovod: %s\n  plait:   %s" % (f, k, _short(a), _short(b)))
    print("%d identical, %d different" % (same, len(diff)))


def _short(v):
    if isinstance(v, np.ndarray):
        return "%s %s %s" % (v.dtype, v.shape, np.array2string(v.ravel()[:8]))
    return str(v)[:400]


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--impl", choices=["horovod", "plait"])
    ap.add_argument("--out")
    ap.add_argument("--compare")
    a = ap.parse_args()
    if a.compare:
        compare(a.compare)
    else:
        run(a.impl, a.out)
