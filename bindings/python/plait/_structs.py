"""The struct layouts of plait.h as ctypes Structures (Tensor, OpOptions,
Stats, TransportInfo), and the header constants they use. plait._core
re-exports every name; tests/bindings/torch/test_bindings.py checks their
sizes against the header's by compiling a program that prints them."""

import ctypes

MAX_DIMS = 16


class Tensor(ctypes.Structure):
    _fields_ = [
        ("struct_size", ctypes.c_size_t),
        ("data", ctypes.c_void_p),
        ("dtype", ctypes.c_int),
        ("device", ctypes.c_int32),
        ("ndim", ctypes.c_int32),
        ("shape", ctypes.c_int64 * MAX_DIMS),
    ]


CALLBACK = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p)


class OpOptions(ctypes.Structure):
    _fields_ = [
        ("struct_size", ctypes.c_size_t),
        ("prescale_factor", ctypes.c_double),
        ("postscale_factor", ctypes.c_double),
        ("callback", CALLBACK),
        ("user_data", ctypes.c_void_p),
        ("process_set", ctypes.c_int32),
        # device tensors: the stream the caller enqueued their producers on
        # (CUDA: a cudaStream_t); None is the legacy default stream
        ("stream", ctypes.c_void_p),
    ]


_STATS_COUNTERS = [
    "cycles", "busy_cycles", "cache_hits", "cache_misses", "responses",
    "tensors", "bytes", "fused_responses", "fused_tensors", "fusion_bytes",
    "fusion_capacity", "control_messages", "control_bytes",
]
_STATS_TIMES = ["negotiate_s", "copy_in_s", "transport_s", "copy_out_s"]


class Stats(ctypes.Structure):
    _fields_ = ([("struct_size", ctypes.c_size_t)] +
                [(n, ctypes.c_uint64) for n in _STATS_COUNTERS] +
                [(n, ctypes.c_double) for n in _STATS_TIMES] +
                [("fusion_threshold_now", ctypes.c_uint64),
                 ("fusion_max_tensor_now", ctypes.c_uint64),
                 ("cycle_time_ms_now", ctypes.c_double),
                 ("autotune_state", ctypes.c_uint64),
                 ("autotune_samples", ctypes.c_uint64),
                 ("settings_digest", ctypes.c_uint64),
                 ("negotiate_cpu_s", ctypes.c_double)])

    def as_dict(self):
        return {n: getattr(self, n) for n, _ in self._fields_[1:]}


class TransportInfo(ctypes.Structure):
    """plait_transport_info_t: what plait_transport_query reports."""
    _fields_ = [("struct_size", ctypes.c_size_t), ("found", ctypes.c_int),
                ("host_memory", ctypes.c_int), ("device_memory", ctypes.c_int), ("library_version", ctypes.c_int),
                ("caps", ctypes.c_uint64), ("path", ctypes.c_char * 4096)]
