"""plait.torch on CUDA tensors, in one process (a job of one rank on one GPU).

With a transport that takes device memory (PLAIT_TRANSPORT=nccl, as
ci/device-test runs this file) the tensors go to plait as they are, ready on
the current stream; with a host-only one (gloo, as ci/test runs it) they are
staged through host memory as Horovod 0.28 built without GPU operations does.
Either way every result must be right, on the input's device, and usable on
the current stream as soon as synchronize() returns.

Skipped, with the reason, where torch has no CUDA device.
"""

import os
import time

import pytest
import torch

if not torch.cuda.is_available():
    pytest.skip("torch.cuda.is_available() is False: no CUDA device here",
                allow_module_level=True)

import plait  # noqa: E402
import plait.torch as hvd  # noqa: E402

FLOATS = [torch.float32, torch.float64, torch.float16, torch.bfloat16]
INTS = [torch.int32, torch.int64, torch.uint8, torch.int8]
DEV = torch.device("cuda", 0)


@pytest.fixture(scope="module", autouse=True)
def job():
    torch.cuda.set_device(0)
    hvd.init()
    yield
    hvd.shutdown()


def on_device():
    """Whether the transport takes device memory (plait.torch's own test of
    its plugin's capability bits)."""
    from plait.torch import _cuda
    return _cuda.device_transport()


def sample(dtype, n=1000, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randint(-50, 50, (n,), generator=g)
    if dtype == torch.uint8:
        x = x.abs()
    return x.to(dtype).to(DEV)


def same(a, b):
    assert a.device == b.device, (a.device, b.device)
    assert a.dtype == b.dtype and a.shape == b.shape, (a.dtype, b.dtype, a.shape, b.shape)
    assert torch.equal(a.cpu(), b.cpu())


@pytest.mark.parametrize("dtype", FLOATS + INTS)
@pytest.mark.parametrize("op", ["Sum", "Average", "Min", "Max", "Product"])
def test_allreduce_out_of_place(dtype, op):
    x = sample(dtype)
    before = x.clone()
    y = hvd.allreduce(x, name="ar.%s.%s" % (dtype, op), op=getattr(hvd, op))
    same(x, before)        # the input is left alone
    same(y, before)        # one rank: every op gives the input back


@pytest.mark.parametrize("dtype", FLOATS + INTS)
def test_allreduce_in_place_with_factors(dtype):
    x = sample(dtype, seed=1)
    want = x.cpu()
    if dtype.is_floating_point:  # powers of two: exact in every float type
        pre, post = 2.0, 0.25
        want = want * 2 * 0.25
    else:
        pre, post = 2.0, 1.0  # |x| < 50: x * 2 fits int8 and uint8
        want = want * 2
    out = hvd.allreduce_(x, name="ar_.%s" % dtype, op=hvd.Sum, prescale_factor=pre,
                         postscale_factor=post)
    assert out is x
    same(x, want.to(DEV))


def test_allreduce_async_poll_and_non_contiguous():
    base = sample(torch.float32, 64 * 33).reshape(64, 33)
    x = base.t()  # not contiguous
    want = x.clone()
    h = hvd.allreduce_async_(x, name="nc", op=hvd.Sum)
    while not hvd.poll(h):
        time.sleep(0.001)
    assert hvd.synchronize(h) is x
    same(x, want)


@pytest.mark.parametrize("fusion", ["many", "one"])
def test_grouped_allreduce(fusion):
    n = 40 if fusion == "many" else 1
    xs = [sample(torch.bfloat16, 17 + i, seed=i) for i in range(n)]
    want = [x.clone() for x in xs]
    ys = hvd.grouped_allreduce(xs, name="g.%s" % fusion, op=hvd.Average)
    for y, w in zip(ys, want):
        same(y, w)
    outs = hvd.grouped_allreduce_(xs, name="g_.%s" % fusion, op=hvd.Sum, postscale_factor=2.0)
    for o, x, w in zip(outs, xs, want):
        assert o is x
        same(x, w * 2)


def test_many_async_allreduces_fused():
    xs = [sample(torch.float16, 100 + i, seed=i) for i in range(64)]
    want = [x.clone() for x in xs]
    hs = [hvd.allreduce_async_(x, name="f.%d" % i, op=hvd.Average) for i, x in enumerate(xs)]
    for h, x, w in zip(hs, xs, want):
        assert hvd.synchronize(h) is x
        same(x, w)


@pytest.mark.parametrize("dtype", FLOATS + INTS + [torch.bool, torch.complex64])
def test_allgather(dtype):
    x = torch.arange(24).reshape(6, 4).to(DEV)
    x = (x % 2).to(dtype) if dtype == torch.bool else x.to(dtype)
    y = hvd.allgather(x, name="ag.%s" % dtype)
    same(y, x)
    ys = hvd.grouped_allgather([x, x[:2]], name="gag.%s" % dtype)
    same(ys[0], x)
    same(ys[1], x[:2].contiguous())


def test_allgather_empty_rows():
    x = torch.empty(0, 3, device=DEV)
    y = hvd.allgather(x, name="ag.empty")
    assert y.shape == (0, 3) and y.device == x.device


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64])
def test_broadcast(dtype):
    x = sample(dtype, 300, seed=3)
    want = x.clone()
    y = hvd.broadcast(x, root_rank=0, name="bc.%s" % dtype)
    same(y, want)
    assert y.data_ptr() != x.data_ptr()
    assert hvd.broadcast_(x, root_rank=0, name="bc_.%s" % dtype) is x
    same(x, want)


def test_alltoall():
    x = torch.arange(12, dtype=torch.float32, device=DEV).reshape(6, 2)
    y = hvd.alltoall(x, name="a2a")
    same(y, x)
    y, received = hvd.alltoall(x, splits=torch.tensor([6], dtype=torch.int32), name="a2a.s")
    same(y, x)
    assert received.tolist() == [6]


@pytest.mark.parametrize("op", ["Sum", "Average"])
def test_reducescatter(op):
    x = sample(torch.float32, 40, seed=5).reshape(10, 4)
    y = hvd.reducescatter(x, name="rs.%s" % op, op=getattr(hvd, op), prescale_factor=0.5,
                          postscale_factor=4.0)
    same(y, x * 2)
    ys = hvd.grouped_reducescatter([x, x.half()], name="grs.%s" % op, op=getattr(hvd, op))
    same(ys[0], x)
    same(ys[1], x.half())


def test_join_and_barrier():
    assert hvd.join() == 0
    hvd.barrier()


def test_ready_on_a_non_default_stream():
    """The input is written on a side stream just before the call, behind a
    kernel that keeps that stream busy: plait must wait for it."""
    side = torch.cuda.Stream(device=DEV)
    x = torch.zeros(1 << 22, device=DEV)
    torch.cuda.synchronize()
    with torch.cuda.stream(side):
        torch.cuda._sleep(200_000_000)  # about 0.1 s of spinning on side
        x.fill_(7.0)
        y = hvd.allreduce(x, name="ready", op=hvd.Sum)
        z = y + 1  # on side, right after synchronize(): must see the result
    side.synchronize()
    assert torch.all(y == 7.0).item()
    assert torch.all(z == 8.0).item()


def test_result_usable_on_the_current_stream_at_once():
    for i in range(20):
        x = torch.full((1 << 16,), float(i), device=DEV)  # sums exact in float32
        y = hvd.allgather(x.reshape(-1, 4), name="use.%d" % i)
        assert y.sum().item() == float(i) * (1 << 16)


def test_distributed_optimizer_matches_plain_sgd():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(10, 20), torch.nn.ReLU(),
                                torch.nn.Linear(20, 3)).to(DEV)
    ref = torch.nn.Sequential(torch.nn.Linear(10, 20), torch.nn.ReLU(),
                              torch.nn.Linear(20, 3)).to(DEV)
    ref.load_state_dict(model.state_dict())
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9),
                                   named_parameters=model.named_parameters())
    hvd.broadcast_optimizer_state(opt, root_rank=0)
    ref_opt = torch.optim.SGD(ref.parameters(), lr=0.1, momentum=0.9)
    data = torch.randn(8, 10, device=DEV)
    target = torch.randint(0, 3, (8,), device=DEV)
    for _ in range(3):
        for m, o in ((model, opt), (ref, ref_opt)):
            o.zero_grad()
            torch.nn.functional.cross_entropy(m(data), target).backward()
            o.step()
    for p, q in zip(model.parameters(), ref.parameters()):
        assert p.device == DEV
        assert torch.equal(p, q)  # one rank: Average of one gradient is that gradient


def test_objects_and_adam_state_under_any_transport():
    """plait.torch's helpers make CPU tensors of their own (pickled bytes,
    Adam's CPU 'step'): under a device-only transport they go through the
    device and come back."""
    assert hvd.broadcast_object({"a": [1, 2]}, root_rank=0, name="obj") == {"a": [1, 2]}
    assert hvd.allgather_object(("x", 3), name="objs") == [("x", 3)]
    model = torch.nn.Linear(4, 2).to(DEV)
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    model(torch.randn(3, 4, device=DEV)).sum().backward()
    opt.step()
    steps = [opt.state[p]["step"].clone() for p in model.parameters()]
    hvd.broadcast_optimizer_state(opt, root_rank=0)
    for p, s in zip(model.parameters(), steps):
        assert torch.equal(opt.state[p]["step"], s)
        assert opt.state[p]["exp_avg"].device == DEV
    cpu_model = torch.nn.Linear(3, 3)
    before = {k: v.clone() for k, v in cpu_model.state_dict().items()}
    hvd.broadcast_parameters(cpu_model.state_dict(), root_rank=0)
    for k, v in cpu_model.state_dict().items():
        assert v.device.type == "cpu" and torch.equal(v, before[k])


def test_gradients_on_the_device():
    x = sample(torch.float32, 12, seed=11).reshape(6, 2).detach().requires_grad_()
    hvd.allgather(x, name="grad.ag").sum().backward()
    assert x.grad.device == DEV and torch.equal(x.grad.cpu(), torch.ones(6, 2))
    y = sample(torch.float32, 8, seed=12).detach().requires_grad_()
    (hvd.allreduce(y, name="grad.ar", op=hvd.Sum) * 3).sum().backward()
    assert torch.equal(y.grad.cpu(), torch.full((8,), 3.0))


def test_empty_tensors_of_a_dtype_moved_as_bytes():
    x = torch.empty(0, 2, dtype=torch.complex64, device=DEV)
    y = hvd.allgather(x, name="ag.empty.complex")
    assert y.shape == (0, 2) and y.dtype == torch.complex64 and y.device == DEV


def test_a_cpu_tensor_under_a_device_transport_is_refused():
    if not on_device():
        pytest.skip("the transport (%s) takes host memory: CPU tensors are its own"
                    % hvd.transport_name())
    with pytest.raises(plait.PlaitError) as e:
        hvd.allreduce(torch.ones(4), name="cpu.on.nccl")
    assert isinstance(e.value, ValueError)  # Horovod's class for an unsupported tensor
    assert "host memory" in str(e.value) and hvd.transport_name() in str(e.value), str(e.value)


def test_staged_path_when_the_transport_is_host_only():
    if on_device():
        pytest.skip("the transport (%s) takes device memory: nothing is staged"
                    % hvd.transport_name())
    from plait.torch import _tensors
    x = sample(torch.float32, seed=9)
    assert _tensors._staged(x)
    y = hvd.allreduce(x, name="staged", op=hvd.Sum)
    same(y, x)


if os.environ.get("PLAIT_TEST_CUDA_REQUIRE_DEVICE") == "1":
    def test_device_transport_in_use():
        """ci/device-test: the device path, not the staged one, was tested."""
        assert on_device(), hvd.transport_name()
