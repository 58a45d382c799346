"""Outputs and gradients of plait.torch and horovod.torch, compared bit for bit.

The same code runs under either library; each rank saves every result to
<out>/rank<r>.pt, and --compare reports, case by case, whether the two
libraries agree (torch.equal, NaN equal to NaN):

    D=/tmp/numerics
    horovodrun -np 2 -H localhost:2 --gloo $HVD_PYTHON tests/bindings/torch/horovod_numerics.py \\
        --impl horovod --out $D/horovod
    plaitrun -np 2 python3 tests/bindings/torch/horovod_numerics.py --impl plait --out $D/plait
    python3 tests/bindings/torch/horovod_numerics.py --compare $D/horovod $D/plait

Cases: allreduce forward for every dtype x op x (prescale, postscale) both
libraries accept (with data whose sums are exact whatever the order of
summation, as in tests/bindings/torch/mp/test_scaling.py, plus random float data);
reducescatter forward; the gradients of allreduce, grouped_allreduce,
allgather, grouped_allgather, broadcast, alltoall, reducescatter and
grouped_reducescatter; one DistributedOptimizer step with a sparse
embedding, with and without named_parameters. Min, Max and Product
gradients differ on purpose (plait's are the true gradients); --compare
lists them as expected differences. A case one library refuses is saved as
the error's type and message.
"""

import argparse
import os
import sys
import zlib

import torch

FLOATS = [torch.float16, torch.bfloat16, torch.float32, torch.float64]
INTS = [torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64]
OPS = ["Sum", "Average", "Min", "Max", "Product"]
FACTORS = [(1.0, 1.0, 1), (0.25, 3.0, 4), (0.1, 3.0, 10), (1.0 / 3.0, 0.7, 3),
           (1.0, 0.1, 1), (0.5, 2.0 / 3.0, 2)]
EXACT_PRE = (1.0, 0.25, 0.5)
EXPECTED_DIFFERENT = ("grad.allreduce.Min", "grad.allreduce.Max", "grad.allreduce.Product",
                      "grad.grouped_allreduce.Min", "grad.grouped_allreduce.Max",
                      "grad.grouped_allreduce.Product")


def values(dtype, k, op, pre, unit, shape, seed):
    """Rank k's input (see tests/bindings/torch/mp/test_scaling.py)."""
    g = torch.Generator().manual_seed(seed * 31 + k)
    lo, hi = (0, 41) if dtype == torch.uint8 else (-20, 21)

    def rand():
        if dtype.is_floating_point:
            return (torch.randn(shape, generator=g, dtype=torch.float64) * 8).to(dtype)
        return torch.randint(lo, hi, shape, generator=g).to(dtype)
    if op in ("Sum", "Average"):
        if pre in EXACT_PRE:
            return torch.randint(lo, hi, shape, generator=g).to(dtype)
        return rand() if k == 0 else torch.zeros(shape, dtype=dtype)
    if k == 0 or op in ("Min", "Max"):
        return rand()
    return torch.full(shape, unit, dtype=dtype)


def run(hvd, out):
    n, r = hvd.size(), hvd.rank()
    res = {}

    def case(key, fn):
        try:
            v = fn()
        except Exception as e:  # noqa: BLE001 - a refused case is a result too
            v = "error: %s: %s" % (type(e).__name__, str(e).splitlines()[0][:120])
        res[key] = v

    # allreduce and reducescatter forward: every dtype x op x factors
    seed = 0
    for dtype in INTS + FLOATS:
        for op in OPS:
            for pre, post, unit in FACTORS:
                seed += 1
                x = values(dtype, r, op, pre, unit, (2 * n + 1, 5), seed)
                key = "%s.%s.pre%.4g.post%.4g" % (str(dtype)[6:], op, pre, post)
                case("allreduce." + key, lambda: hvd.allreduce(
                    x, op=getattr(hvd, op), name="ar.%d" % seed, prescale_factor=pre,
                    postscale_factor=post))
                if op in ("Sum", "Average"):
                    case("reducescatter." + key, lambda: hvd.reducescatter(
                        x, op=getattr(hvd, op), name="rs.%d" % seed, prescale_factor=pre,
                        postscale_factor=post))
    # random float data (exact at 2 ranks, where a sum of two is one rounding)
    g = torch.Generator().manual_seed(99 + r)
    for dtype in FLOATS:
        x = torch.randn(64, generator=g, dtype=torch.float64).to(dtype)
        for op in OPS:
            for pre, post in [(1.0, 1.0), (0.1, 3.0), (1.0 / 3.0, 1.0)]:
                key = "random.%s.%s.pre%.4g.post%.4g" % (str(dtype)[6:], op, pre, post)
                case("allreduce." + key, lambda: hvd.allreduce(
                    x, op=getattr(hvd, op), name=key, prescale_factor=pre,
                    postscale_factor=post))

    # gradients: L_r = sum(w_r * y_r)
    def grads(name, fn, shapes, out_shapes):
        gen = torch.Generator().manual_seed(zlib.crc32(name.encode()) % 1000 + 7 * r)
        xs = [torch.randint(-8, 9, s, generator=gen).double().requires_grad_(True)
              for s in shapes]
        ys = fn(xs)
        ws = [torch.randint(-8, 9, y.shape, generator=gen).double() for y in ys]
        sum((w * y).sum() for w, y in zip(ws, ys)).backward()
        return {"y": [y.detach() for y in ys], "grad": [x.grad for x in xs]}

    for op in OPS:
        for pre, post in [(1.0, 1.0), (0.25, 2.0), (0.5, 0.1)]:
            sfx = "%s.pre%g.post%g" % (op, pre, post)
            case("grad.allreduce." + sfx, lambda: grads("ar" + sfx, lambda xs: [hvd.allreduce(
                xs[0], op=getattr(hvd, op), prescale_factor=pre, postscale_factor=post)],
                [(4, 3)], None))
            case("grad.grouped_allreduce." + sfx, lambda: grads(
                "gar" + sfx, lambda xs: hvd.grouped_allreduce(
                    xs, op=getattr(hvd, op), prescale_factor=pre, postscale_factor=post),
                [(4,), (2, 2)], None))
            if op in ("Sum", "Average"):
                case("grad.reducescatter." + sfx, lambda: grads(
                    "rs" + sfx, lambda xs: [hvd.reducescatter(
                        xs[0], op=getattr(hvd, op), prescale_factor=pre,
                        postscale_factor=post)], [(2 * n + 1, 2)], None))
                case("grad.grouped_reducescatter." + sfx, lambda: grads(
                    "grs" + sfx, lambda xs: hvd.grouped_reducescatter(
                        xs, op=getattr(hvd, op), prescale_factor=pre,
                        postscale_factor=post), [(2 * n + 1, 2), (n,)], None))
    case("grad.allgather", lambda: grads("ag", lambda xs: [hvd.allgather(xs[0])],
                                         [(r + 1, 2)], None))
    case("grad.grouped_allgather", lambda: grads(
        "gag", lambda xs: hvd.grouped_allgather(xs), [(r + 1, 2), (n - r,)], None))
    for root in range(n):
        case("grad.broadcast.root%d" % root, lambda: grads(
            "bc%d" % root, lambda xs: [hvd.broadcast(xs[0], root)], [(3,)], None))
    splits = [(r + j) % 3 + 1 for j in range(n)]
    case("grad.alltoall", lambda: grads(
        "a2a", lambda xs: [hvd.alltoall(xs[0], splits=splits)[0]], [(sum(splits), 2)], None))
    case("alltoall_async", lambda: list(hvd.synchronize(hvd.alltoall_async(
        torch.arange(2 * n, dtype=torch.float32) + 10 * r))))

    # what the grouped forms and alltoall_async return
    t = torch.ones(n, 2) * (r + 1)
    case("result_types", lambda: " ".join(type(v).__name__ for v in [
        hvd.synchronize(hvd.grouped_allreduce_async([t, t])), hvd.grouped_allreduce([t, t]),
        hvd.grouped_allreduce_([t.clone(), t.clone()]), hvd.grouped_allgather([t, t]),
        hvd.synchronize(hvd.grouped_allgather_async([t, t])), hvd.grouped_reducescatter([t, t]),
        hvd.synchronize(hvd.grouped_reducescatter_async([t, t])),
        hvd.synchronize(hvd.alltoall_async(t)), hvd.join()]))

    # DistributedOptimizer with a sparse embedding, one step
    for named in (True, False):
        for dense in (False, True):
            def step():
                torch.manual_seed(3)
                emb = torch.nn.Embedding(10, 3, sparse=True).double()
                lin = torch.nn.Linear(3, 1).double()
                params = list(emb.parameters()) + list(lin.parameters())
                kw = dict(named_parameters=[("emb.weight", params[0]), ("lin.weight", params[1]),
                                            ("lin.bias", params[2])]) if named else {}
                opt = hvd.DistributedOptimizer(torch.optim.SGD(params, lr=0.5),
                                               sparse_as_dense=dense, **kw)
                idx = torch.tensor([[r % 10, (3 * r + 1) % 10, 7]])
                lin(emb(idx).sum(1)).sum().backward()
                opt.step()
                return [p.detach().clone() for p in params] + [params[0].grad.to_dense()]
            case("optimizer.sparse.named%d.dense%d" % (named, dense), step)

    os.makedirs(out, exist_ok=True)
    torch.save(res, os.path.join(out, "rank%d.pt" % r))


def same(a, b):
    if isinstance(a, str) or isinstance(b, str):
        return a == b
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if a.dtype != b.dtype or a.shape != b.shape:
        return False
    if a.dtype.is_floating_point:
        return bool(((a == b) | (torch.isnan(a) & torch.isnan(b))).all())
    return torch.equal(a, b)


def compare(dir_a, dir_b):
    ranks = sorted(f for f in os.listdir(dir_a) if f.startswith("rank"))
    agree, differ, expected, refused = 0, [], [], []
    for f in ranks:
        a = torch.load(os.path.join(dir_a, f))
        b = torch.load(os.path.join(dir_b, f))
        for key in sorted(set(a) | set(b)):
            va, vb = a.get(key, "missing"), b.get(key, "missing")
            error = any(isinstance(v, str) and v.startswith(("error", "missing"))
                        for v in (va, vb))
            if error:
                if not same(va, vb):
                    refused.append("%s %s: A %s | B %s" % (
                        f, key, va if isinstance(va, str) else "ok",
                        vb if isinstance(vb, str) else "ok"))
                else:
                    agree += 1
            elif same(va, vb):
                agree += 1
            elif key.startswith(EXPECTED_DIFFERENT):
                expected.append("%s %s" % (f, key))
            else:
                differ.append("%s %s:\n  A %s\n  B %s" % (f, key, va, vb))
    print("%d results identical" % agree)
    print("%d differ as documented (Min/Max/Product gradients)" % len(expected))
    print("%d refused by one library only:" % len(refused))
    for line in refused:
        print("  " + line)
    print("%d differ:" % len(differ))
    for line in differ:
        print("  " + line)
    return 1 if differ else 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--impl", choices=["plait", "horovod"])
    ap.add_argument("--out")
    ap.add_argument("--compare", nargs=2, metavar="DIR")
    args = ap.parse_args()
    if args.compare:
        return compare(*args.compare)
    if args.impl == "plait":
        import plait.torch as hvd
    else:
        import horovod.torch as hvd
    hvd.init()
    torch.set_num_threads(1)
    run(hvd, args.out)
    hvd.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
