/*
 * GPU test: the nccl plugin's other entries (allgatherv with equal and
 * unequal parts, broadcast from every root, alltoallv, reducescatter with
 * equal and unequal counts, barrier, mem_*, subset) and its refusals (host
 * memory, a bad root), against values computed on the host. At size 1 on
 * one GPU and, where the machine has more, one rank per GPU. Skips (77)
 * without a GPU.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "values.h"
#include "../../harness/transport_calls.h"

static uint8_t pattern(int from, int to, size_t j) { return (uint8_t)(from * 16 + to * 3 + j); }

static void *to_device(tally_t *ty, const void *host, size_t bytes) {
  void *dev = NULL;
  if (cudaMalloc(&dev, bytes ? bytes : 1) != cudaSuccess) return NULL;
  if (bytes && cudaMemcpy(dev, host, bytes, cudaMemcpyHostToDevice) != cudaSuccess) {
    cudaFree(dev);
    return NULL;
  }
  (void)ty;
  return dev;
}

static int from_device(void *host, const void *dev, size_t bytes) {
  return !bytes || cudaMemcpy(host, dev, bytes, cudaMemcpyDeviceToHost) == cudaSuccess;
}

static void allgatherv(tally_t *ty, const plait_transport_t *t, void *st, int n, int equal) {
  size_t bytes[NT_MAX_RANKS] = {0}, total = 0, mine = 0;
  for (int r = 0; r < n; r++) {
    bytes[r] = equal ? 1000 : (r == 1 ? 0 : 100 + 37 * (size_t)r);
    if (r < ty->rank) mine += bytes[r];
    total += bytes[r];
  }
  uint8_t *h = calloc(total + 1, 1);
  for (size_t j = 0; j < bytes[ty->rank]; j++) h[mine + j] = pattern(ty->rank, 0, j);
  void *d = to_device(ty, h, total);
  EXPECT(ty, d != NULL, "device buffer");
  if (!d) {
    free(h);
    return;
  }
  plait_result_t rc = t->allgatherv(st, d, bytes);
  EXPECT(ty, rc == PLAIT_SUCCESS, "allgatherv: %s", t->last_error(st));
  if (rc == PLAIT_SUCCESS && from_device(h, d, total)) {
    size_t off = 0, bad = 0;
    for (int r = 0; r < n; r++)
      for (size_t j = 0; j < bytes[r]; j++, off++) bad += h[off] != pattern(r, 0, j);
    EXPECT(ty, bad == 0, "allgatherv (%s parts): %zu bytes wrong", equal ? "equal" : "unequal",
           bad);
  }
  cudaFree(d);
  free(h);
}

static void broadcast(tally_t *ty, const plait_transport_t *t, void *st, int n) {
  size_t bytes = 4097;
  uint8_t *h = malloc(bytes);
  for (int root = 0; root < n; root++) {
    for (size_t j = 0; j < bytes; j++) h[j] = ty->rank == root ? pattern(root, 1, j) : 0xee;
    void *d = to_device(ty, h, bytes);
    EXPECT(ty, d != NULL, "device buffer");
    if (!d) break;
    plait_result_t rc = t->broadcast(st, d, bytes, root);
    EXPECT(ty, rc == PLAIT_SUCCESS, "broadcast from %d: %s", root, t->last_error(st));
    size_t bad = 0;
    if (rc == PLAIT_SUCCESS && from_device(h, d, bytes))
      for (size_t j = 0; j < bytes; j++) bad += h[j] != pattern(root, 1, j);
    EXPECT(ty, bad == 0, "broadcast from %d: %zu bytes wrong", root, bad);
    cudaFree(d);
  }
  free(h);
}

static void alltoallv(tally_t *ty, const plait_transport_t *t, void *st, int n) {
  size_t sb[NT_MAX_RANKS] = {0}, rb[NT_MAX_RANKS] = {0}, ts = 0, tr = 0;
  for (int p = 0; p < n; p++) {
    sb[p] = 10 + 3 * (size_t)ty->rank + 5 * (size_t)p; /* me -> p */
    rb[p] = 10 + 3 * (size_t)p + 5 * (size_t)ty->rank; /* p -> me */
    ts += sb[p];
    tr += rb[p];
  }
  uint8_t *hs = malloc(ts), *hr = malloc(tr);
  size_t o = 0;
  for (int p = 0; p < n; p++)
    for (size_t j = 0; j < sb[p]; j++) hs[o++] = pattern(ty->rank, p, j);
  memset(hr, 0xee, tr);
  void *ds = to_device(ty, hs, ts), *dr = to_device(ty, hr, tr);
  EXPECT(ty, ds && dr, "device buffers");
  if (ds && dr) {
    plait_result_t rc = t->alltoallv(st, ds, sb, dr, rb);
    EXPECT(ty, rc == PLAIT_SUCCESS, "alltoallv: %s", t->last_error(st));
    size_t bad = 0;
    o = 0;
    if (rc == PLAIT_SUCCESS && from_device(hr, dr, tr))
      for (int p = 0; p < n; p++)
        for (size_t j = 0; j < rb[p]; j++) bad += hr[o++] != pattern(p, ty->rank, j);
    EXPECT(ty, bad == 0, "alltoallv: %zu bytes wrong", bad);
  }
  cudaFree(ds);
  cudaFree(dr);
  free(hs);
  free(hr);
}

static void reducescatter(tally_t *ty, const plait_transport_t *t, void *st, int n,
                          plait_dtype_t d, plait_op_t op, int equal) {
  size_t counts[NT_MAX_RANKS] = {0}, total = 0, start = 0, es = plait_dtype_size_inline(d);
  for (int r = 0; r < n; r++) {
    counts[r] = equal ? 1000 : 100 + 50 * (size_t)r;
    if (r < ty->rank) start += counts[r];
    total += counts[r];
  }
  size_t mine = counts[ty->rank];
  char *hs = malloc(total * es), *hr = malloc(mine * es + 1);
  for (size_t i = 0; i < total; i++) ops_put(d, hs, i, nv_value(d, op, ty->rank, n, i));
  void *ds = to_device(ty, hs, total * es), *dr = to_device(ty, hr, mine * es);
  EXPECT(ty, ds && dr, "device buffers");
  if (ds && dr) {
    plait_result_t rc = t->reducescatter(st, ds, dr, counts, d, op);
    EXPECT(ty, rc == PLAIT_SUCCESS, "reducescatter %s %s: %s", plait_op_name_inline(op),
           plait_dtype_name_inline(d), t->last_error(st));
    size_t bad = 0;
    if (rc == PLAIT_SUCCESS && from_device(hr, dr, mine * es))
      for (size_t i = 0; i < mine; i++)
        bad += !(fabs(ops_get(d, hr, i) - nv_reference(d, op, n, start + i)) <=
                 nv_tolerance(d, n));
    EXPECT(ty, bad == 0, "reducescatter %s %s (%s counts): %zu of %zu wrong",
           plait_op_name_inline(op), plait_dtype_name_inline(d), equal ? "equal" : "unequal",
           bad, mine);
  }
  cudaFree(ds);
  cudaFree(dr);
  free(hs);
  free(hr);
}

static void memory(tally_t *ty, const plait_transport_t *t, void *st) {
  size_t bytes = 1 << 20;
  uint8_t *h = malloc(bytes), *back = calloc(bytes, 1);
  for (size_t j = 0; j < bytes; j++) h[j] = pattern(ty->rank, 2, j);
  void *a = NULL, *b = NULL;
  plait_result_t rc = t->mem_alloc(st, bytes, &a);
  if (rc == PLAIT_SUCCESS) rc = t->mem_alloc(st, bytes, &b);
  if (rc == PLAIT_SUCCESS) rc = t->mem_copy(st, a, h, bytes, PLAIT_COPY_HOST_TO_DEVICE);
  if (rc == PLAIT_SUCCESS) rc = t->mem_copy(st, b, a, bytes, PLAIT_COPY_DEVICE_TO_DEVICE);
  if (rc == PLAIT_SUCCESS) rc = t->mem_copy(st, back, b, bytes, PLAIT_COPY_DEVICE_TO_HOST);
  EXPECT(ty, rc == PLAIT_SUCCESS, "mem_alloc/mem_copy: %s", t->last_error(st));
  EXPECT(ty, rc != PLAIT_SUCCESS || memcmp(h, back, bytes) == 0,
         "host -> device -> device -> host changed the bytes");
  EXPECT(ty, t->mem_free(st, a) == PLAIT_SUCCESS && t->mem_free(st, b) == PLAIT_SUCCESS,
         "mem_free: %s", t->last_error(st));
  free(h);
  free(back);
}

/* Host memory is refused with a message, and the state stays usable. */
static void refusals(tally_t *ty, const plait_transport_t *t, void *st, int n) {
  float host[16] = {0};
  plait_result_t rc = tc_allreduce(t, st, host, 16, PLAIT_FLOAT32, PLAIT_OP_SUM);
  EXPECT(ty, rc == PLAIT_ERR_INVALID_ARGUMENT && strstr(t->last_error(st), "host memory"),
         "allreduce on host memory: want INVALID_ARGUMENT naming host memory, got %s: %s",
         plait_result_name_inline(rc), t->last_error(st));
  rc = t->broadcast(st, host, sizeof host, n);
  EXPECT(ty, rc == PLAIT_ERR_INVALID_ARGUMENT && strstr(t->last_error(st), "root"),
         "broadcast from root %d: want INVALID_ARGUMENT naming the root, got %s: %s", n,
         plait_result_name_inline(rc), t->last_error(st));
  rc = t->barrier(st);
  EXPECT(ty, rc == PLAIT_SUCCESS, "barrier after the refusals: %s", t->last_error(st));
}

/* The plugin's stream is non-blocking, but work the caller left on the
 * legacy default stream (PyTorch's default) must be complete before the
 * plugin reads its buffers: 8 memsets of 256 MiB on stream 0, the last
 * writing 0x11, then at once a copy (mem_copy) and, at size 1, a
 * reducescatter (a copy there) must see 0x11 only. */
static void after_default_stream(tally_t *ty, const plait_transport_t *t, void *st, int n) {
  size_t bytes = 256u << 20;
  uint8_t *back = malloc(bytes);
  void *a = NULL, *b = NULL;
  int ok = back && cudaMalloc(&a, bytes) == cudaSuccess && cudaMalloc(&b, bytes) == cudaSuccess;
  EXPECT(ty, ok, "buffers for the ordering check");
  for (int round = 0; ok && round < (n == 1 ? 2 : 1); round++) {
    ok = cudaMemset(a, 0x22, bytes) == cudaSuccess && cudaMemset(b, 0, bytes) == cudaSuccess &&
         cudaDeviceSynchronize() == cudaSuccess;
    for (int k = 0; ok && k < 8; k++)
      ok = cudaMemsetAsync(a, k == 7 ? 0x11 : 0x30 + k, bytes, 0) == cudaSuccess;
    size_t counts[1] = {bytes};
    plait_result_t rc =
        round == 0 ? t->mem_copy(st, b, a, bytes, PLAIT_COPY_DEVICE_TO_DEVICE)
                   : t->reducescatter(st, a, b, counts, PLAIT_UINT8, PLAIT_OP_SUM);
    const char *what = round == 0 ? "mem_copy" : "reducescatter";
    EXPECT(ty, ok && rc == PLAIT_SUCCESS, "%s after work on stream 0: %s", what,
           t->last_error(st));
    size_t bad = 0;
    if (ok && rc == PLAIT_SUCCESS && cudaMemcpy(back, b, bytes, cudaMemcpyDeviceToHost) == 0)
      for (size_t j = 0; j < bytes; j++) bad += back[j] != 0x11;
    EXPECT(ty, bad == 0, "%s did not wait for stream 0: %zu of %zu bytes were read early",
           what, bad, bytes);
  }
  cudaFree(a);
  cudaFree(b);
  free(back);
}

/* A subset of every rank but rank 0 (every rank at size 1): its allreduce
 * involves its members only. */
static void subset(tally_t *ty, const plait_transport_t *t, void *st, int n) {
  int ranks[NT_MAX_RANKS], k = 0;
  for (int r = n > 1 ? 1 : 0; r < n; r++) ranks[k++] = r;
  void *sub = (void *)1;
  plait_result_t rc = t->subset(st, ranks, k, &sub);
  EXPECT(ty, rc == PLAIT_SUCCESS, "subset: %s", t->last_error(st));
  if (rc != PLAIT_SUCCESS) return;
  int member = n == 1 || ty->rank > 0;
  EXPECT(ty, member ? sub != NULL : sub == NULL, "subset: member %d but sub %p", member, sub);
  if (!sub) return;
  float v = (float)(ty->rank + 1), want = 0;
  for (int i = 0; i < k; i++) want += (float)(ranks[i] + 1);
  void *d = to_device(ty, &v, sizeof v);
  rc = d ? tc_allreduce(t, sub, d, 1, PLAIT_FLOAT32, PLAIT_OP_SUM) : PLAIT_ERR_NO_MEMORY;
  EXPECT(ty, rc == PLAIT_SUCCESS, "allreduce on the subset: %s", t->last_error(sub));
  if (rc == PLAIT_SUCCESS && from_device(&v, d, sizeof v))
    EXPECT(ty, v == want, "allreduce on the subset gave %g, want %g", v, want);
  cudaFree(d);
  t->finalize(sub);
}

static int body(int rank, int n, const plait_transport_t *t, void *st, void *arg) {
  (void)arg;
  tally_t ty = {rank, 0, 0};
  allgatherv(&ty, t, st, n, 1);
  if (n > 1) allgatherv(&ty, t, st, n, 0);
  broadcast(&ty, t, st, n);
  alltoallv(&ty, t, st, n);
  static const plait_dtype_t dts[] = {PLAIT_FLOAT32, PLAIT_BFLOAT16, PLAIT_FLOAT16, PLAIT_INT32,
                                      PLAIT_INT64, PLAIT_BOOL};
  static const plait_op_t ops[] = {PLAIT_OP_SUM, PLAIT_OP_AVERAGE, PLAIT_OP_MAX};
  for (size_t i = 0; i < sizeof dts / sizeof dts[0]; i++)
    for (size_t j = 0; j < sizeof ops / sizeof ops[0]; j++) {
      if (dts[i] == PLAIT_BOOL && ops[j] == PLAIT_OP_AVERAGE) continue;
      reducescatter(&ty, t, st, n, dts[i], ops[j], 1);
      if (n > 1) reducescatter(&ty, t, st, n, dts[i], ops[j], 0);
    }
  for (int i = 0; i < 3; i++)
    EXPECT(&ty, t->barrier(st) == PLAIT_SUCCESS, "barrier: %s", t->last_error(st));
  memory(&ty, t, st);
  after_default_stream(&ty, t, st, n);
  refusals(&ty, t, st, n);
  subset(&ty, t, st, n);
  EXPECT(&ty, t->algorithm && t->algorithm(st, PLAIT_CAP_ALLREDUCE, 1024) != NULL,
         "algorithm() names no algorithm for allreduce");
  nt_say(rank, "collectives at %d rank(s): %d checks, %d failed", n, ty.checks, ty.failed);
  return ty.failed != 0;
}

int main(void) {
  char why[256];
  int gpus = nt_device_count(why, sizeof why);
  if (gpus < 1) {
    printf("SKIP: no GPU here: %s\n", why);
    return NT_SKIP;
  }
  int failed = nt_run(1, 600, body, NULL);
  if (gpus > 1) failed |= nt_run(gpus < NT_MAX_RANKS ? gpus : NT_MAX_RANKS, 600, body, NULL);
  else printf("one GPU: the multi-rank run needs two or more (NCCL refuses two ranks on one GPU)\n");
  printf("nccl_collectives: %s\n", failed ? "FAILED" : "passed");
  return failed ? 1 : 0;
}
