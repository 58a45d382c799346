// reducescatter as one gloo::alltoallv plus a local reduction.
//
// gloo has no function-style reduce-scatter, and its old algorithm classes
// (ReduceScatterHalvingDoubling, ...) must not share a context with
// gloo::allreduce: mixing the two APIs on one context measured 5-15x slower.
// Instead every rank sends block r of its input to rank r (alltoallv, which
// moves (n-1)/n of the data per rank, like a ring) and reduces the n blocks
// it receives with the core's kernel, in rank order.
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>

#include "errors.h"
#include "ops.h"
#include "plait/dtypes.h"

namespace plait_gloo {

namespace {
struct Layout {
  size_t esize;
  size_t total;  // elements in send
  size_t mine;   // elements this rank receives
};
}  // namespace

static Layout check_args(const State &s, const void *send, void *recv,
                         const size_t *counts, plait_dtype_t dtype,
                         plait_op_t op) {
  check_reduction("reducescatter", dtype, op);
  PLAIT_GLOO_REQUIRE(counts != nullptr, "reducescatter: counts is NULL");
  Layout l{plait_dtype_size_inline(dtype), 0, counts[s.rank]};
  const size_t max_elems = std::numeric_limits<size_t>::max() / l.esize;
  for (int r = 0; r < s.nranks; r++) {
    PLAIT_GLOO_REQUIRE(counts[r] <= max_elems - l.total,
                       "reducescatter: the sum of counts[] overflows");
    l.total += counts[r];
  }
  PLAIT_GLOO_REQUIRE(send != nullptr || l.total == 0,
                     "reducescatter: send is NULL but counts sum to %zu",
                     l.total);
  PLAIT_GLOO_REQUIRE(recv != nullptr || l.mine == 0,
                     "reducescatter: recv is NULL but counts[%d] is %zu",
                     s.rank, l.mine);
  PLAIT_GLOO_REQUIRE(l.mine <= max_elems / (size_t)s.nranks,
                     "reducescatter: counts[%d] = %zu is too large to gather "
                     "from %d ranks",
                     s.rank, l.mine, s.nranks);
  const uintptr_t sb = (uintptr_t)send, rb = (uintptr_t)recv;
  const size_t sn = l.total * l.esize, rn = l.mine * l.esize;
  PLAIT_GLOO_REQUIRE(sn == 0 || rn == 0 || sb + sn <= rb || rb + rn <= sb,
                     "reducescatter: send and recv overlap");
  return l;
}

static void kernel_check(plait_result_t rc, const char *what,
                         plait_dtype_t dtype) {
  if (rc != PLAIT_SUCCESS)
    fail(rc, "reducescatter: the core's kernel failed to %s %s (%s)", what,
         plait_dtype_name_inline(dtype), plait_result_name_inline(rc));
}

void reducescatter(State &s, const void *send, void *recv, const size_t *counts,
                   plait_dtype_t dtype, plait_op_t op) {
  const Layout l = check_args(s, send, recv, counts, dtype, op);
  if (l.total == 0) return;  // counts[] are the same on every rank
  const size_t block = l.mine * l.esize;
  if (s.nranks == 1) {  // every op over one rank, AVERAGE included: itself
    std::memcpy(recv, send, block);
    return;
  }

  const size_t n = (size_t)s.nranks;
  // Out of memory here (std::bad_alloc) breaks the context like a failure
  // inside gloo: the other ranks are already in the alltoallv.
  std::unique_ptr<unsigned char[]> blocks(new unsigned char[n * block + 1]);
  std::vector<int64_t> send_bytes(n), recv_bytes(n, (int64_t)block);
  for (size_t r = 0; r < n; r++) send_bytes[r] = (int64_t)(counts[r] * l.esize);
  gloo_alltoallv_bytes(s, send, send_bytes, blocks.get(), recv_bytes);
  if (l.mine == 0) return;

  const plait_op_t rop = op == PLAIT_OP_AVERAGE ? PLAIT_OP_SUM : op;
  unsigned char *b = blocks.get();
  kernel_check(s.reduce(dtype, rop, recv, b, b + block, l.mine), "reduce",
               dtype);
  for (size_t r = 2; r < n; r++)
    kernel_check(s.reduce(dtype, rop, recv, recv, b + r * block, l.mine),
                 "reduce", dtype);
  if (op == PLAIT_OP_AVERAGE)
    kernel_check(s.divide(dtype, recv, recv, l.mine, (uint32_t)n), "divide",
                 dtype);
}

}  // namespace plait_gloo
