/*
 * GPU test of the device-memory path through the public C API
 * (PLAIT_TRANSPORT=nccl): every op x dtype (but the 16-bit integers, which
 * NCCL cannot reduce) x scale factors (none, prescale,
 * postscale, both) on several tensors in flight at once, in place and out
 * of place, against host references (tests/plugins/nccl/values.h); a grouped
 * allreduce; allgather, alltoall and reducescatter with the outputs plait
 * allocates on the device, and broadcast; and readiness on a user stream
 * (opts.stream): the input is written by a cudaMemcpyAsync on that stream
 * behind a host function that holds the stream for 100 ms, just before the
 * call, with no host synchronisation.
 *
 *   nccl_device_ops [fusion-threshold]   e.g. 0: every tensor alone
 *
 * Alone it is a job of one rank on GPU 0; under plaitrun -np N (one GPU per
 * rank: ci/device-test does it where the GPUs allow) rank r uses GPU
 * local_rank. Skips (77) without a GPU, printing CUDA's reason.
 *
 * Built with NT_ON_DEVSIM (nccl_device_ops_devsim), the same program runs
 * on the devsim test transport's simulated device instead (cuda_on_devsim.h):
 * no GPU needed, it checks the program itself against the core's device path.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "nccl_ranks.h"
#include "plait/dtypes.h"
#include "plait/plait.h"
#include "values.h"
#ifdef NT_ON_DEVSIM
#include "cuda_on_devsim.h"
#else
#include <cuda_runtime_api.h>
#endif

#define NT 6 /* tensors in flight per round */
static const size_t lens[NT] = {1, 7, 1000, 4097, 0, 65537};

static int checks, failed, rank_, size_, dev_;

#define CHECK(cond, ...)                                                       \
  do {                                                                         \
    checks++;                                                                  \
    if (!(cond)) {                                                             \
      failed++;                                                                \
      printf("[%d] FAILED line %d: ", rank_, __LINE__);                        \
      printf(__VA_ARGS__);                                                     \
      printf("\n");                                                            \
    }                                                                          \
  } while (0)

/* Not int16 and uint16: NCCL has no 16-bit integers and the nccl plugin
 * refuses their reductions (nccl_allreduce checks that refusal). */
static const plait_dtype_t dtypes[] = {PLAIT_UINT8,   PLAIT_INT8,     PLAIT_INT32,
                                       PLAIT_INT64,   PLAIT_FLOAT16,  PLAIT_BFLOAT16,
                                       PLAIT_FLOAT32, PLAIT_FLOAT64,  PLAIT_BOOL};
static const plait_op_t ops[] = {PLAIT_OP_SUM, PLAIT_OP_AVERAGE, PLAIT_OP_MIN, PLAIT_OP_MAX,
                                 PLAIT_OP_PRODUCT};

static void device_tensor(plait_tensor_t *t, void *data, size_t count, plait_dtype_t d) {
  plait_tensor_1d(t, data, count, d);
  t->device = dev_;
}

static void tensor_2d(plait_tensor_t *t, void *data, plait_dtype_t d, int64_t rows, int64_t cols) {
  device_tensor(t, data, (size_t)(rows * cols), d);
  t->ndim = 2;
  t->shape[0] = rows;
  t->shape[1] = cols;
}

/* The reference with factors, in plait's arithmetic (Horovod's): each
 * rank's value times pre, reduced, then times post, with AVERAGE folding
 * 1/size into post (post / size in double); integers truncated toward zero
 * after each scaling. */
static double reference(plait_dtype_t d, plait_op_t op, size_t i, double pre, double post) {
  double vals[NT_MAX_RANKS];
  if (size_ < 1 || size_ > NT_MAX_RANKS) return NAN;
  for (int r = 0; r < size_; r++) {
    vals[r] = nv_value(d, op, r, size_, i) * pre;
    if (!ops_is_float(d)) vals[r] = trunc(vals[r]);
  }
  double acc = ops_reduce(d, op, vals, size_) * ops_postscale(op, size_, post);
  return ops_is_float(d) ? acc : trunc(acc);
}

/* Fills a device buffer of n elements with this rank's values. */
static int upload(void *dev, plait_dtype_t d, plait_op_t op, size_t n, unsigned char *host) {
  for (size_t i = 0; i < n; i++) ops_put(d, host, i, nv_value(d, op, rank_, size_, i));
  return n == 0 || cudaMemcpy(dev, host, n * plait_dtype_size_inline(d), cudaMemcpyHostToDevice) ==
                       cudaSuccess;
}

static int compare(const char *what, const void *dev, plait_dtype_t d, plait_op_t op, size_t n,
                   double pre, double post, unsigned char *host) {
  if (n && cudaMemcpy(host, dev, n * plait_dtype_size_inline(d), cudaMemcpyDeviceToHost)) {
    CHECK(0, "%s: cudaMemcpy back failed", what);
    return 1;
  }
  double tol = nv_tolerance(d, size_) * fabs(pre) * fabs(post) * 2.0;
  size_t bad = 0, first = 0;
  for (size_t i = 0; i < n; i++) {
    double want = reference(d, op, i, pre, post), got = ops_get(d, host, i);
    if (fabs(got - want) > tol && !bad++) first = i;
  }
  CHECK(bad == 0, "%s: %zu of %zu wrong, first [%zu] = %g, want %g", what, bad, n, first,
        n ? ops_get(d, host, first) : 0.0, n ? reference(d, op, first, pre, post) : 0.0);
  return bad != 0;
}

/* NT allreduces of dtype d with op in flight at once (even ones in place,
 * odd ones out of place), submitted back to back once their inputs are on
 * the device, waited for and checked. The names depend on the arguments
 * only, so that a second round with the same ones runs as the response
 * cache's burst (fused, where fusion is on). */
static void allreduce_round(plait_dtype_t d, plait_op_t op, double pre, double post,
                            unsigned char *host) {
  plait_op_options_t o = PLAIT_OP_OPTIONS_INIT;
  o.prescale_factor = pre;
  o.postscale_factor = post;
  void *in[NT] = {0}, *out[NT] = {0};
  plait_handle_t *h[NT] = {0};
  char names[NT][64];
  size_t es = plait_dtype_size_inline(d);
  for (int k = 0; k < NT; k++) {
    snprintf(names[k], sizeof names[k], "ar.%s.%s.%g.%g.%d", plait_dtype_name_inline(d),
             plait_op_name_inline(op), pre, post, k);
    int ok = cudaMalloc(&in[k], lens[k] * es + 8) == cudaSuccess &&
             upload(in[k], d, op, lens[k], host);
    if (k % 2) ok = ok && cudaMalloc(&out[k], lens[k] * es + 8) == cudaSuccess &&
                    cudaMemset(out[k], 0x55, lens[k] * es + 8) == cudaSuccess;
    else out[k] = in[k];
    CHECK(ok, "%s: device buffers", names[k]);
    if (!ok) out[k] = in[k] = NULL;
  }
  for (int k = 0; k < NT; k++) {
    if (!in[k]) continue;
    plait_tensor_t ti, to;
    device_tensor(&ti, in[k], lens[k], d);
    device_tensor(&to, out[k], lens[k], d);
    plait_result_t rc = plait_allreduce_async(names[k], &ti, &to, op, &o, &h[k]);
    CHECK(rc == PLAIT_SUCCESS, "%s: submit: %s", names[k], plait_last_error());
  }
  for (int k = 0; k < NT; k++) {
    if (!h[k]) continue;
    plait_result_t rc = plait_wait(h[k], 120);
    CHECK(rc == PLAIT_SUCCESS, "%s: %s", names[k], plait_last_error());
    plait_release(h[k]);
    if (rc == PLAIT_SUCCESS) compare(names[k], out[k], d, op, lens[k], pre, post, host);
  }
  for (int k = 0; k < NT; k++) {
    if (out[k] != in[k]) cudaFree(out[k]);
    cudaFree(in[k]);
  }
}

/* AVERAGE and factors other than 1 on bool: refused at the call, named. */
static void bool_refusals(void) {
  void *buf = NULL;
  if (cudaMalloc(&buf, 16)) return;
  plait_tensor_t t;
  device_tensor(&t, buf, 16, PLAIT_BOOL);
  plait_handle_t *h = NULL;
  plait_result_t rc = plait_allreduce_async("bool.avg", &t, &t, PLAIT_OP_AVERAGE, NULL, &h);
  if (rc == PLAIT_SUCCESS) {
    rc = plait_wait(h, 120);
    plait_release(h);
  }
  CHECK(rc == PLAIT_ERR_INVALID_ARGUMENT, "AVERAGE on bool: got %s", plait_result_name_inline(rc));
  cudaFree(buf);
}

static void allreduce_matrix(void) {
  unsigned char *host = malloc(lens[NT - 1] * 8 + 8);
  for (size_t di = 0; di < sizeof dtypes / sizeof dtypes[0]; di++) {
    plait_dtype_t d = dtypes[di];
    for (size_t oi = 0; oi < sizeof ops / sizeof ops[0]; oi++) {
      plait_op_t op = ops[oi];
      if (d == PLAIT_BOOL && op == PLAIT_OP_AVERAGE) continue;
      allreduce_round(d, op, 1.0, 1.0, host);
      allreduce_round(d, op, 1.0, 1.0, host); /* again: the cached burst */
      if (d == PLAIT_BOOL || (op == PLAIT_OP_PRODUCT && !ops_is_float(d))) continue;
      double post = ops_is_float(d) ? 0.5 : 1.0; /* exact in every dtype */
      allreduce_round(d, op, 2.0, 1.0, host);
      allreduce_round(d, op, 1.0, post, host);
      allreduce_round(d, op, 2.0, post, host);
    }
  }
  bool_refusals();
  free(host);
}

/* One grouped allreduce of NT float16 tensors, out of place, AVERAGE, with
 * a postscale factor. */
static void grouped(void) {
  unsigned char *host = malloc(lens[NT - 1] * 2 + 8);
  void *in[NT] = {0}, *out[NT] = {0};
  plait_tensor_t ti[NT], to[NT];
  char nbuf[NT][32];
  const char *names[NT];
  int ok = 1;
  for (int k = 0; k < NT; k++) {
    snprintf(nbuf[k], sizeof nbuf[k], "grouped.%d", k);
    names[k] = nbuf[k];
    ok = ok && cudaMalloc(&in[k], lens[k] * 2 + 8) == cudaSuccess &&
         cudaMalloc(&out[k], lens[k] * 2 + 8) == cudaSuccess &&
         upload(in[k], PLAIT_FLOAT16, PLAIT_OP_AVERAGE, lens[k], host);
    device_tensor(&ti[k], in[k], lens[k], PLAIT_FLOAT16);
    device_tensor(&to[k], out[k], lens[k], PLAIT_FLOAT16);
  }
  CHECK(ok, "grouped: device buffers");
  plait_op_options_t o = PLAIT_OP_OPTIONS_INIT;
  o.postscale_factor = 0.5;
  plait_handle_t *h = NULL;
  plait_result_t rc = PLAIT_ERR_NO_MEMORY;
  if (ok) rc = plait_grouped_allreduce_async(NT, names, ti, to, PLAIT_OP_AVERAGE, &o, &h);
  if (rc == PLAIT_SUCCESS) rc = plait_wait(h, 120);
  CHECK(rc == PLAIT_SUCCESS, "grouped allreduce: %s", plait_last_error());
  plait_release(h);
  for (int k = 0; rc == PLAIT_SUCCESS && k < NT; k++)
    compare(names[k], out[k], PLAIT_FLOAT16, PLAIT_OP_AVERAGE, lens[k], 1.0, 0.5, host);
  for (int k = 0; k < NT; k++) cudaFree(in[k]), cudaFree(out[k]);
  free(host);
}

static void CUDART_CB hold_stream(void *arg) {
  (void)arg;
  usleep(100 * 1000);
}

/* The input is written on a user stream, behind 100 ms of that stream being
 * held, right before the call; plait must wait for it (opts.stream). */
static void ready_on_user_stream(void) {
  enum { N = 1 << 20 };
  float *host = NULL, *dev = NULL;
  cudaStream_t s = NULL;
  int ok = cudaMallocHost((void **)&host, N * 4) == cudaSuccess &&
           cudaMalloc((void **)&dev, N * 4) == cudaSuccess &&
           cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) == cudaSuccess &&
           cudaMemset(dev, 0, N * 4) == cudaSuccess && cudaDeviceSynchronize() == cudaSuccess;
  CHECK(ok, "user stream: setup");
  if (!ok) goto cleanup;
  for (int i = 0; i < N; i++) host[i] = (float)(i % 1000) + 0.5f;
  ok = cudaLaunchHostFunc(s, hold_stream, NULL) == cudaSuccess &&
       cudaMemcpyAsync(dev, host, N * 4, cudaMemcpyHostToDevice, s) == cudaSuccess;
  CHECK(ok, "user stream: enqueue");
  plait_op_options_t o = PLAIT_OP_OPTIONS_INIT;
  o.stream = s;
  plait_tensor_t t;
  device_tensor(&t, dev, N, PLAIT_FLOAT32);
  plait_handle_t *h = NULL;
  plait_result_t rc = plait_allreduce_async("ready.stream", &t, &t, PLAIT_OP_SUM, &o, &h);
  if (rc == PLAIT_SUCCESS) rc = plait_wait(h, 120);
  CHECK(rc == PLAIT_SUCCESS, "allreduce on a user stream: %s", plait_last_error());
  plait_release(h);
  float *back = malloc(N * 4);
  if (rc == PLAIT_SUCCESS && cudaMemcpy(back, dev, N * 4, cudaMemcpyDeviceToHost) == cudaSuccess) {
    int bad = 0;
    for (int i = 0; i < N; i++) bad += back[i] != host[i] * (float)size_;
    CHECK(bad == 0, "ready on a user stream: %d of %d elements read before they were written "
          "(plait did not wait for opts.stream)", bad, N);
  }
  free(back);
cleanup:
  if (s) cudaStreamSynchronize(s), cudaStreamDestroy(s);
  cudaFree(dev);
  cudaFreeHost(host);
}

/* Waits for h and copies its output (device memory owned by the handle)
 * into host; returns its element count, or -1. */
static long long fetch_output(plait_handle_t *h, const char *what, void *host, size_t cap) {
  plait_result_t rc = plait_wait(h, 120);
  CHECK(rc == PLAIT_SUCCESS, "%s: %s", what, plait_last_error());
  if (rc != PLAIT_SUCCESS) return -1;
  plait_tensor_t out;
  memset(&out, 0, sizeof out);
  out.struct_size = sizeof out;
  rc = plait_handle_output(h, &out);
  CHECK(rc == PLAIT_SUCCESS && out.device == dev_, "%s: output on device %d, want %d: %s", what,
        out.device, dev_, plait_last_error());
  long long n = 1;
  for (int i = 0; i < out.ndim; i++) n *= out.shape[i];
  size_t bytes = (size_t)n * plait_dtype_size_inline(out.dtype);
  if (rc != PLAIT_SUCCESS || bytes > cap ||
      (bytes && cudaMemcpy(host, out.data, bytes, cudaMemcpyDeviceToHost) != cudaSuccess)) {
    CHECK(0, "%s: output of %zu bytes not readable", what, bytes);
    return -1;
  }
  return n;
}

/* Rank r's rows r+1 of 3 floats, gathered: every rank's block in order. */
static void allgather_out(float *host, size_t cap) {
  size_t rows = (size_t)rank_ + 1, n = rows * 3;
  void *in = NULL;
  CHECK(cudaMalloc(&in, n * 4) == cudaSuccess && upload(in, PLAIT_FLOAT32, PLAIT_OP_SUM, n,
                                                        (unsigned char *)host), "allgather: input");
  plait_tensor_t t;
  tensor_2d(&t, in, PLAIT_FLOAT32, (int64_t)rows, 3);
  plait_handle_t *h = NULL;
  plait_result_t rc = plait_allgather_async("out.allgather", &t, NULL, &h);
  CHECK(rc == PLAIT_SUCCESS, "allgather: %s", plait_last_error());
  long long got = rc == PLAIT_SUCCESS ? fetch_output(h, "allgather", host, cap) : -1;
  plait_release(h);
  long long want = 3LL * size_ * (size_ + 1) / 2;
  CHECK(got == want, "allgather: %lld elements, want %lld", got, want);
  size_t bad = 0, at = 0;
  for (int q = 0; got == want && q < size_; q++)
    for (size_t j = 0; j < (size_t)(q + 1) * 3; j++, at++)
      bad += host[at] != (float)nv_value(PLAIT_FLOAT32, PLAIT_OP_SUM, q, size_, j);
  CHECK(bad == 0, "allgather: %zu elements wrong", bad);
  cudaFree(in);
}

/* 2 rows of 3 floats to every rank; value 100 * sender + its element. */
static void alltoall_out(float *host, size_t cap) {
  size_t n = (size_t)size_ * 6;
  for (size_t i = 0; i < n; i++) host[i] = (float)(100 * rank_) + (float)i;
  void *in = NULL;
  CHECK(cudaMalloc(&in, n * 4) == cudaSuccess &&
        cudaMemcpy(in, host, n * 4, cudaMemcpyHostToDevice) == cudaSuccess, "alltoall: input");
  plait_tensor_t t;
  tensor_2d(&t, in, PLAIT_FLOAT32, (int64_t)size_ * 2, 3);
  plait_handle_t *h = NULL;
  plait_result_t rc = plait_alltoall_async("out.alltoall", &t, NULL, NULL, &h);
  CHECK(rc == PLAIT_SUCCESS, "alltoall: %s", plait_last_error());
  long long got = rc == PLAIT_SUCCESS ? fetch_output(h, "alltoall", host, cap) : -1;
  int64_t splits[NT_MAX_RANKS] = {0};
  if (got >= 0) plait_handle_splits(h, splits, NT_MAX_RANKS);
  plait_release(h);
  CHECK(got == (long long)n, "alltoall: %lld elements, want %zu", got, n);
  size_t bad = 0;
  for (int q = 0; got == (long long)n && q < size_; q++) {
    CHECK(splits[q] == 2, "alltoall: %lld rows from rank %d, want 2", (long long)splits[q], q);
    for (size_t j = 0; j < 6; j++)
      bad += host[q * 6 + j] != (float)(100 * q) + (float)(rank_ * 6 + j);
  }
  CHECK(bad == 0, "alltoall: %zu elements wrong", bad);
  cudaFree(in);
}

/* 2 * size + 1 rows of 5 bfloat16, summed with prescale 2: rank 0 gets 3
 * rows, the others 2. */
static void reducescatter_out(unsigned char *host, size_t cap) {
  size_t rows = 2 * (size_t)size_ + 1, n = rows * 5;
  void *in = NULL;
  CHECK(cudaMalloc(&in, n * 2) == cudaSuccess && upload(in, PLAIT_BFLOAT16, PLAIT_OP_SUM, n, host),
        "reducescatter: input");
  plait_tensor_t t;
  tensor_2d(&t, in, PLAIT_BFLOAT16, (int64_t)rows, 5);
  plait_op_options_t o = PLAIT_OP_OPTIONS_INIT;
  o.prescale_factor = 2.0;
  plait_handle_t *h = NULL;
  plait_result_t rc = plait_reducescatter_async("out.reducescatter", &t, PLAIT_OP_SUM, &o, &h);
  CHECK(rc == PLAIT_SUCCESS, "reducescatter: %s", plait_last_error());
  long long got = rc == PLAIT_SUCCESS ? fetch_output(h, "reducescatter", host, cap) : -1;
  plait_release(h);
  size_t mine = rank_ == 0 ? 3 : 2, first = rank_ == 0 ? 0 : 3 + 2 * ((size_t)rank_ - 1);
  CHECK(got == (long long)(mine * 5), "reducescatter: %lld elements, want %zu", got, mine * 5);
  size_t bad = 0;
  for (size_t j = 0; got == (long long)(mine * 5) && j < mine * 5; j++) {
    double want = reference(PLAIT_BFLOAT16, PLAIT_OP_SUM, first * 5 + j, 2.0, 1.0);
    bad += fabs(ops_get(PLAIT_BFLOAT16, host, j) - want) > nv_tolerance(PLAIT_BFLOAT16, size_) * 2;
  }
  CHECK(bad == 0, "reducescatter: %zu elements wrong", bad);
  cudaFree(in);
}

/* int64 from the last rank, in place. */
static void broadcast_in_place(unsigned char *host) {
  size_t n = 999;
  void *buf = NULL;
  CHECK(cudaMalloc(&buf, n * 8) == cudaSuccess && upload(buf, PLAIT_INT64, PLAIT_OP_SUM, n, host),
        "broadcast: input");
  plait_tensor_t t;
  device_tensor(&t, buf, n, PLAIT_INT64);
  plait_handle_t *h = NULL;
  plait_result_t rc = plait_broadcast_async("broadcast", &t, size_ - 1, NULL, &h);
  if (rc == PLAIT_SUCCESS) rc = plait_wait(h, 120);
  CHECK(rc == PLAIT_SUCCESS, "broadcast: %s", plait_last_error());
  plait_release(h);
  size_t bad = 0;
  if (rc == PLAIT_SUCCESS && cudaMemcpy(host, buf, n * 8, cudaMemcpyDeviceToHost) == cudaSuccess)
    for (size_t i = 0; i < n; i++)
      bad += ops_get(PLAIT_INT64, host, i) !=
             nv_value(PLAIT_INT64, PLAIT_OP_SUM, size_ - 1, size_, i);
  CHECK(rc == PLAIT_SUCCESS && bad == 0, "broadcast: %zu elements differ from the root's", bad);
  cudaFree(buf);
}

static void outputs_on_device(void) {
  size_t cap = 1 << 16;
  void *host = malloc(cap);
  allgather_out(host, cap);
  alltoall_out(host, cap);
  reducescatter_out(host, cap);
  broadcast_in_place(host);
  free(host);
}

int main(int argc, char **argv) {
  int count = 0;
  cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess || count < 1) {
    printf("SKIP: no GPU here: cudaGetDeviceCount: %s\n",
           e != cudaSuccess ? cudaGetErrorString(e) : "no device");
    return NT_SKIP;
  }
  if (!getenv("PLAIT_RANK")) nt_api_env(); /* alone: a job of one rank */
  else setenv("PLAIT_TRANSPORT", "nccl", 1), setenv("PLAIT_PLUGIN_PATH", PLAIT_NCCL_PLUGIN_DIR, 0);
#ifdef NT_ON_DEVSIM
  if (nt_devsim_setup()) return 1;
#endif
  if (argc > 1) setenv("PLAIT_FUSION_THRESHOLD", argv[1], 1);
  plait_result_t rc = plait_init();
  CHECK(rc == PLAIT_SUCCESS, "plait_init: %s", plait_last_error());
  if (rc != PLAIT_SUCCESS) return 1;
  plait_rank(&rank_);
  plait_size(&size_);
  int local = 0;
  plait_local_rank(&local);
  dev_ = local;
  cudaSetDevice(dev_);
  printf("[%d] %d ranks, GPU %d, PLAIT_FUSION_THRESHOLD=%s\n", rank_, size_, dev_,
         argc > 1 ? argv[1] : "(default)");
  plait_stats_t st;
  memset(&st, 0, sizeof st);
  st.struct_size = sizeof st;
  plait_stats(&st);
  unsigned long long fused_before = st.fused_tensors;
  grouped(); /* one unit: fused unless fusion is off */
  plait_stats(&st);
  int off = argc > 1 && !strcmp(argv[1], "0");
  CHECK(off || st.fused_tensors > fused_before, "fusion on, yet the grouped allreduce fused "
        "nothing (fused tensors %llu)", (unsigned long long)st.fused_tensors);
  allreduce_matrix();
  ready_on_user_stream();
  outputs_on_device();
  if (plait_stats(&st) == PLAIT_SUCCESS)
    printf("[%d] fused responses %llu, fused tensors %llu\n", rank_,
           (unsigned long long)st.fused_responses, (unsigned long long)st.fused_tensors);
  CHECK(!off || st.fused_tensors == 0, "fusion off, yet %llu tensors fused",
        (unsigned long long)st.fused_tensors);
  CHECK(plait_shutdown() == PLAIT_SUCCESS, "plait_shutdown: %s", plait_last_error());
  printf("[%d] %d checks, %d failed\n", rank_, checks, failed);
  return failed ? 1 : 0;
}
