#include "batch.h"

#include <stdlib.h>

#include "batch_plan.h"
#include "errors.h"
#include "kernels.h"
#include "wait.h"

/* A slot of at least n entries (a grown one's old buffer is retired: the
 * stream passed it, but cudaFreeHost may synchronise the device). */
static plait_result_t slot_reserve(nccl_state_t *st, nc_slot_t *s, size_t n) {
  cudaError_t e;
  if (!s->ev && (e = cudaEventCreateWithFlags(&s->ev, cudaEventDisableTiming)) != cudaSuccess)
    return nc_cuda_fail(st, PLAIT_ERR_TRANSPORT, "cudaEventCreateWithFlags (staging)", e);
  if (s->cap >= n) return PLAIT_SUCCESS;
  size_t cap = s->cap ? s->cap : 64;
  while (cap < n) cap *= 2;
  nc_retired_t *old = s->host ? malloc(sizeof *old) : NULL;
  if (s->host && !old) return nc_fail(st, PLAIT_ERR_NO_MEMORY, "out of memory");
  void *p = NULL;
  e = cudaHostAlloc(&p, cap * sizeof(nc_span_ent_t), cudaHostAllocDefault);
  if (e != cudaSuccess) {
    free(old);
    cudaGetLastError();
    return nc_cuda_fail(st, PLAIT_ERR_NO_MEMORY, "cudaHostAlloc (batch_copy's staging table)", e);
  }
  if (old) {
    old->host = s->host;
    old->next = st->fam->retired;
    st->fam->retired = old;
  }
  s->host = p;
  s->cap = cap;
  return PLAIT_SUCCESS;
}

/* A device table of at least m entries, allocated and freed in stream order. */
static plait_result_t dev_reserve(nccl_state_t *st, size_t m) {
  nc_family_t *f = st->fam;
  if (f->dev_cap >= m) return PLAIT_SUCCESS;
  size_t cap = f->dev_cap ? f->dev_cap : 64;
  while (cap < m) cap *= 2;
  void *p = NULL;
  cudaError_t e = cudaMallocAsync(&p, cap * sizeof(nc_span_ent_t), f->stream);
  if (e != cudaSuccess) {
    cudaGetLastError();
    return nc_cuda_fail(st, PLAIT_ERR_NO_MEMORY, "cudaMallocAsync (batch_copy's table)", e);
  }
  if (f->dev_tab && (e = cudaFreeAsync(f->dev_tab, f->stream)) != cudaSuccess)
    return nc_cuda_break(st, PLAIT_ERR_TRANSPORT, "cudaFreeAsync (batch_copy's old table)", e);
  f->dev_tab = p;
  f->dev_cap = cap;
  return PLAIT_SUCCESS;
}

plait_result_t nc_batch_enqueue(nccl_state_t *st, const plait_span_t *spans, size_t n,
                                plait_dtype_t dtype, plait_op_t op, double factor,
                                uint32_t divisor) {
  nc_family_t *f = st->fam;
  if (n == 0) return PLAIT_SUCCESS;
  nc_slot_t *s = &f->slots[f->next_slot % NC_STAGE_SLOTS];
  if (s->used) NC_CHECK(nc_wait_event(st, s->ev, "batch_copy (a staging table still in use)"));
  s->used = 0;
  NC_CHECK(slot_reserve(st, s, n));
  uint32_t m = 0;
  uint64_t chunks = 0;
  char why[256];
  if (nc_plan(spans, n, plait_dtype_size_inline(dtype), s->host, &m, &chunks, why, sizeof why))
    return nc_fail(st, PLAIT_ERR_INVALID_ARGUMENT, "%s", why);
  if (m == 0) return PLAIT_SUCCESS;
  NC_CHECK(dev_reserve(st, m));
  cudaError_t e = cudaMemcpyAsync(f->dev_tab, s->host, m * sizeof(nc_span_ent_t),
                                  cudaMemcpyHostToDevice, f->stream);
  if (e != cudaSuccess)
    return nc_cuda_break(st, PLAIT_ERR_TRANSPORT, "cudaMemcpyAsync (batch_copy's table)", e);
  if ((e = cudaEventRecord(s->ev, f->stream)) != cudaSuccess)
    return nc_cuda_break(st, PLAIT_ERR_TRANSPORT, "cudaEventRecord (batch_copy's table)", e);
  s->used = 1;
  f->next_slot++;
  e = nc_launch_batch(f->dev_tab, m, chunks, (int)dtype, factor, divisor,
                      nc_identity_bits(dtype, op), f->stream);
  if (e != cudaSuccess)
    return nc_cuda_break(st, PLAIT_ERR_TRANSPORT, "batch_copy's kernel launch", e);
  return PLAIT_SUCCESS;
}

plait_result_t nc_batch_divide(nccl_state_t *st, void *buf, size_t count, plait_dtype_t dtype,
                               uint32_t divisor) {
  plait_span_t span = {buf, buf, count};
  return nc_batch_enqueue(st, &span, 1, dtype, PLAIT_OP_SUM, 1.0, divisor);
}

void nc_batch_release(nc_family_t *f) {
  for (int i = 0; i < NC_STAGE_SLOTS; i++) {
    if (f->slots[i].host) cudaFreeHost(f->slots[i].host);
    if (f->slots[i].ev) cudaEventDestroy(f->slots[i].ev);
  }
  while (f->retired) {
    nc_retired_t *r = f->retired;
    f->retired = r->next;
    cudaFreeHost(r->host);
    free(r);
  }
  if (f->dev_tab) cudaFreeAsync(f->dev_tab, f->stream); /* before the stream goes */
  f->dev_tab = NULL;
}
