// allreduce, allgatherv, broadcast, alltoallv and barrier on gloo's
// function-style collectives (gloo/allreduce.h, allgatherv.h, ...), with the
// semantics transport.h documents. Zero-sized calls return at once when the
// sizes tell every rank the same (count, total bytes); gloo's allreduce
// refuses 0 elements. Every gloo call gets the next tag of the state, which
// is the same on every rank.
#include <gloo/allgatherv.h>
#include <gloo/allreduce.h>
#include <gloo/alltoallv.h>
#include <gloo/barrier.h>
#include <gloo/broadcast.h>

#include <cstdint>
#include <cstring>
#include <limits>

#include "errors.h"
#include "ops.h"
#include "plait/dtypes.h"

namespace plait_gloo {

// A zero-sized buffer may be NULL in the caller's hands; gloo gets a real
// address instead, so that no NULL reaches its memcpy() calls.
static unsigned char empty_buffer[1];

static void *or_empty(void *p) { return p != nullptr ? p : empty_buffer; }

static size_t checked_sum(const char *what, const char *name, const size_t *v,
                          int n) {
  size_t total = 0;
  for (int r = 0; r < n; r++) {
    PLAIT_GLOO_REQUIRE(v[r] <= std::numeric_limits<size_t>::max() - total,
                       "%s: the sum of %s[] overflows size_t", what, name);
    total += v[r];
  }
  return total;
}

void check_reduction(const char *what, plait_dtype_t dtype, plait_op_t op) {
  PLAIT_GLOO_REQUIRE(plait_dtype_valid_inline(dtype), "%s: dtype %d is not a plait dtype",
                     what, (int)dtype);
  PLAIT_GLOO_REQUIRE(plait_op_valid_inline(op), "%s: op %d is not a plait op", what,
                     (int)op);
  PLAIT_GLOO_REQUIRE(!(dtype == PLAIT_BOOL && op == PLAIT_OP_AVERAGE),
                     "%s: op average is not defined for dtype bool (sum and "
                     "max are logical or, min and product logical and)",
                     what);
}

// The element type only tells gloo the element size; the reduction itself is
// the core's kernel.
static void set_allreduce_output(gloo::AllreduceOptions &opts, void *buf,
                                 size_t count, size_t esize) {
  switch (esize) {
    case 1:
      opts.setOutput(static_cast<uint8_t *>(buf), count);
      break;
    case 2:
      opts.setOutput(static_cast<uint16_t *>(buf), count);
      break;
    case 4:
      opts.setOutput(static_cast<uint32_t *>(buf), count);
      break;
    case 8:
      opts.setOutput(static_cast<uint64_t *>(buf), count);
      break;
    default:
      fail(PLAIT_ERR_INTERNAL, "allreduce: element size %zu", esize);
  }
}

void allreduce(State &s, void *buf, size_t count, plait_dtype_t dtype,
               plait_op_t op) {
  check_reduction("allreduce", dtype, op);
  const size_t esize = plait_dtype_size_inline(dtype);
  PLAIT_GLOO_REQUIRE(count <= std::numeric_limits<size_t>::max() / esize,
                     "allreduce: count %zu of %s overflows size_t", count,
                     plait_dtype_name_inline(dtype));
  PLAIT_GLOO_REQUIRE(buf != nullptr || count == 0,
                     "allreduce: buf is NULL but count is %zu", count);
  if (count == 0 || s.nranks == 1) return;  // AVERAGE over 1 rank: itself

  // gloo's ring reduces AVERAGE as SUM; the division comes after.
  const plait_op_t reduce_op = op == PLAIT_OP_AVERAGE ? PLAIT_OP_SUM : op;
  const plait_reduce_fn reduce = s.reduce;
  plait_result_t kernel_rc = PLAIT_SUCCESS;
  gloo::AllreduceOptions opts(s.context);
  set_allreduce_output(opts, buf, count, esize);
  opts.setReduceFunction(
      [=, &kernel_rc](void *c, const void *a, const void *b, size_t n) {
        plait_result_t rc = reduce(dtype, reduce_op, c, a, b, n);
        if (rc != PLAIT_SUCCESS && kernel_rc == PLAIT_SUCCESS) kernel_rc = rc;
      });
  opts.setTag(s.tag());
  gloo::allreduce(opts);
  if (kernel_rc != PLAIT_SUCCESS)
    fail(kernel_rc, "allreduce: the core's kernel failed to reduce %s %s (%s)",
         plait_dtype_name_inline(dtype), plait_op_name_inline(reduce_op), plait_result_name_inline(kernel_rc));
  if (op == PLAIT_OP_AVERAGE) {
    plait_result_t rc = s.divide(dtype, buf, buf, count, (uint32_t)s.nranks);
    if (rc != PLAIT_SUCCESS)
      fail(rc, "allreduce: the core's kernel failed to divide %s by %d (%s)",
           plait_dtype_name_inline(dtype), s.nranks, plait_result_name_inline(rc));
  }
}

void allgatherv(State &s, void *buf, const size_t *bytes) {
  PLAIT_GLOO_REQUIRE(bytes != nullptr, "allgatherv: bytes is NULL");
  const size_t total = checked_sum("allgatherv", "bytes", bytes, s.nranks);
  PLAIT_GLOO_REQUIRE(buf != nullptr || total == 0,
                     "allgatherv: buf is NULL but the bytes sum to %zu", total);
  if (total == 0 || s.nranks == 1) return;
  // No input buffer: gloo then takes this rank's part from the output, which
  // is exactly the in-place layout (an input aliasing the output slice would
  // be memcpy'd onto itself).
  gloo::AllgathervOptions opts(s.context);
  opts.setOutput(static_cast<uint8_t *>(buf),
                 std::vector<size_t>(bytes, bytes + s.nranks));
  opts.setTag(s.tag());
  gloo::allgatherv(opts);
}

void broadcast(State &s, void *buf, size_t bytes, int root) {
  PLAIT_GLOO_REQUIRE(root >= 0 && root < s.nranks,
                     "broadcast: root %d is not a rank in [0, %d)", root,
                     s.nranks);
  PLAIT_GLOO_REQUIRE(buf != nullptr || bytes == 0,
                     "broadcast: buf is NULL but bytes is %zu", bytes);
  if (bytes == 0 || s.nranks == 1) return;
  gloo::BroadcastOptions opts(s.context);
  opts.setOutput(static_cast<uint8_t *>(buf), bytes);  // in place everywhere
  opts.setRoot(root);
  opts.setTag(s.tag());
  gloo::broadcast(opts);
}

void gloo_alltoallv_bytes(State &s, const void *send,
                          const std::vector<int64_t> &send_bytes, void *recv,
                          const std::vector<int64_t> &recv_bytes) {
  gloo::AlltoallvOptions opts(s.context);
  // gloo only reads the input; its API takes a non-const pointer.
  opts.setInput(static_cast<uint8_t *>(or_empty(const_cast<void *>(send))),
                send_bytes);
  opts.setOutput(static_cast<uint8_t *>(or_empty(recv)), recv_bytes);
  opts.setTag(s.tag());
  gloo::alltoallv(opts);
}

static std::vector<int64_t> as_int64(const char *name, const size_t *v, int n) {
  std::vector<int64_t> out((size_t)n);
  for (int r = 0; r < n; r++) {
    PLAIT_GLOO_REQUIRE(v[r] <= (size_t)std::numeric_limits<int64_t>::max(),
                       "alltoallv: %s[%d] = %zu is too large", name, r, v[r]);
    out[(size_t)r] = (int64_t)v[r];
  }
  return out;
}

void alltoallv(State &s, const void *send, const size_t *send_bytes, void *recv,
               const size_t *recv_bytes) {
  PLAIT_GLOO_REQUIRE(send_bytes != nullptr, "alltoallv: send_bytes is NULL");
  PLAIT_GLOO_REQUIRE(recv_bytes != nullptr, "alltoallv: recv_bytes is NULL");
  const size_t ts =
      checked_sum("alltoallv", "send_bytes", send_bytes, s.nranks);
  const size_t tr =
      checked_sum("alltoallv", "recv_bytes", recv_bytes, s.nranks);
  PLAIT_GLOO_REQUIRE(send != nullptr || ts == 0,
                     "alltoallv: send is NULL but send_bytes sum to %zu", ts);
  PLAIT_GLOO_REQUIRE(recv != nullptr || tr == 0,
                     "alltoallv: recv is NULL but recv_bytes sum to %zu", tr);
  PLAIT_GLOO_REQUIRE(send_bytes[s.rank] == recv_bytes[s.rank],
                     "alltoallv: send_bytes[%d] = %zu but recv_bytes[%d] = "
                     "%zu (this rank's block to itself)",
                     s.rank, send_bytes[s.rank], s.rank, recv_bytes[s.rank]);
  const uintptr_t sb = (uintptr_t)send, rb = (uintptr_t)recv;
  PLAIT_GLOO_REQUIRE(ts == 0 || tr == 0 || sb + ts <= rb || rb + tr <= sb,
                     "alltoallv: send and recv overlap");
  if (s.nranks == 1) {
    if (tr > 0) std::memcpy(recv, send, tr);
    return;
  }
  // No shortcut for a rank with nothing to move: the other ranks still
  // exchange (empty) messages with it.
  gloo_alltoallv_bytes(s, send, as_int64("send_bytes", send_bytes, s.nranks),
                       recv, as_int64("recv_bytes", recv_bytes, s.nranks));
}

void barrier(State &s) {
  if (s.nranks == 1) return;
  gloo::BarrierOptions opts(s.context);
  opts.setTag(s.tag());
  gloo::barrier(opts);
}

}  // namespace plait_gloo
