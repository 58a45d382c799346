"""Helpers of the elastic tests: what every rank holds, compared across ranks."""

import numpy as np
import tensorflow as tf

import plait.tensorflow as ptf


def gathered(arrays, name):
    """Every rank's arrays (flattened, as float64), one row per rank."""
    flat = np.concatenate([np.asarray(a, dtype=np.float64).reshape(-1) for a in arrays])
    return ptf.allgather(tf.constant(flat.reshape(1, -1)), name="elastic_test." + name).numpy()


def assert_same_on_every_rank(arrays, name):
    rows = gathered(arrays, name)
    for r in range(rows.shape[0]):
        assert np.array_equal(rows[r], rows[0]), "rank %d differs from rank 0 (%s)" % (r, name)


def assert_differ_across_ranks(arrays, name):
    rows = gathered(arrays, name)
    assert any(not np.array_equal(rows[r], rows[0]) for r in range(1, rows.shape[0])), \
        "every rank holds the same values (%s)" % name


def values(variables):
    return [np.array(v.numpy(), copy=True) for v in variables]


def assert_values(variables, expected):
    assert len(variables) == len(expected)
    for i, (v, e) in enumerate(zip(variables, expected)):
        np.testing.assert_array_equal(np.asarray(v.numpy()), e, err_msg="variable %d" % i)


def tensors_submitted():
    """The number of tensors this rank has given plait so far."""
    return ptf.stats()["tensors"]
