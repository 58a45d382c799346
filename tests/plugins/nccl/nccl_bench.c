/*
 * Benchmark (prints figures, checks nothing about time): what the nccl
 * plugin adds over a bare ncclAllReduce, per collective, over sizes. Both
 * run on the same device and in-place float32 sum; the bare side is
 * ncclAllReduce + cudaStreamSynchronize on its own communicator, the plugin
 * side its allreduce() (checks, an event on the legacy default stream that
 * its stream waits for, enqueue, then poll an event with
 * ncclCommGetAsyncError). One rank per GPU (size 1 on one GPU). Each
 * figure is the median of one-call timings, the two sides interleaved.
 *
 * Then, in a process of its own, the whole of plait at size 1 on GPU 0:
 * plait_allreduce_async + plait_wait + plait_release of one device tensor
 * (the coordinator, the response cache, the plugin) against a bare
 * ncclAllReduce + cudaStreamSynchronize on a one-rank communicator of the
 * same process, interleaved; it prints the overhead per size and the goal
 * (under 10 us per collective up to 1 MiB) as a PASS or MISS line.
 * Usage: nccl_bench [max_bytes]   (default 256 MiB). Exit 77 without a GPU.
 */
#include <nccl.h>
#include <sys/wait.h>
#include <unistd.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common.h"
#include "../../harness/transport_calls.h"

static size_t g_max = 256u << 20;

static double now_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec * 1e-3;
}

static int cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static double median(double *v, int n) {
  qsort(v, (size_t)n, sizeof *v, cmp);
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static int bare_comm(int rank, int n, ncclComm_t *comm) {
  ncclUniqueId id;
  memset(&id, 0, sizeof id);
  if (rank == 0 && ncclGetUniqueId(&id) != ncclSuccess) return 1;
  const plait_bootstrap_t *b = nt_bootstrap();
  if (b->broadcast(b->ctx, &id, sizeof id, 0) != PLAIT_SUCCESS) return 1;
  return ncclCommInitRank(comm, n, id, rank) != ncclSuccess;
}

static int body(int rank, int n, const plait_transport_t *t, void *st, void *arg) {
  (void)arg;
  ncclComm_t comm;
  cudaStream_t stream;
  if (bare_comm(rank, n, &comm) || cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking)) {
    nt_say(rank, "cannot make the bare NCCL communicator or stream");
    return 1;
  }
  int dev = -1;
  cudaGetDevice(&dev);
  struct cudaDeviceProp prop;
  cudaGetDeviceProperties(&prop, dev);
  int version = 0;
  ncclGetVersion(&version);
  if (rank == 0)
    printf("nccl_bench: %d rank(s), device %s, NCCL %d; in-place float32 sum; median of "
           "one-call times\n%12s %8s %12s %12s %12s\n",
           n, prop.name, version, "bytes", "iters", "bare_us", "plugin_us", "overhead_us");
  enum { MAX_ITERS = 400 };
  double bare[MAX_ITERS], plug[MAX_ITERS];
  int failed = 0;
  for (size_t bytes = 4; bytes <= g_max && !failed; bytes *= 8) {
    void *buf = NULL;
    if (cudaMalloc(&buf, bytes) != cudaSuccess || cudaMemset(buf, 0, bytes) != cudaSuccess) {
      nt_say(rank, "cudaMalloc %zu bytes failed", bytes);
      return 1;
    }
    cudaDeviceSynchronize();
    size_t count = bytes / 4;
    int iters = bytes <= (1u << 20) ? MAX_ITERS : bytes <= (16u << 20) ? 100 : 20;
    for (int i = -10; i < iters && !failed; i++) { /* 10 warm-ups */
      double t0 = now_us();
      failed |= ncclAllReduce(buf, buf, count, ncclFloat32, ncclSum, comm, stream) != ncclSuccess;
      failed |= cudaStreamSynchronize(stream) != cudaSuccess;
      double t1 = now_us();
      plait_result_t rc = tc_allreduce(t, st, buf, count, PLAIT_FLOAT32, PLAIT_OP_SUM);
      double t2 = now_us();
      if (rc != PLAIT_SUCCESS) {
        nt_say(rank, "plugin allreduce: %s", t->last_error(st));
        failed = 1;
      }
      if (i >= 0) bare[i] = t1 - t0, plug[i] = t2 - t1;
    }
    cudaFree(buf);
    if (failed) break;
    double b = median(bare, iters), p = median(plug, iters);
    if (rank == 0) printf("%12zu %8d %12.2f %12.2f %12.2f\n", bytes, iters, b, p, p - b);
    fflush(stdout);
  }
  ncclCommDestroy(comm);
  cudaStreamDestroy(stream);
  return failed;
}

/* One size of api_overhead: median bare and plait times over iters calls. */
static int api_size(ncclComm_t comm, cudaStream_t stream, size_t bytes, int iters, double *bare,
                    double *api, double *mb, double *mp) {
  void *buf = NULL;
  if (cudaMalloc(&buf, bytes) != cudaSuccess || cudaMemset(buf, 0, bytes) != cudaSuccess) {
    printf("nccl_bench: cudaMalloc %zu bytes failed\n", bytes);
    return 1;
  }
  cudaDeviceSynchronize();
  plait_tensor_t t;
  plait_tensor_1d(&t, buf, bytes / 4, PLAIT_FLOAT32);
  t.device = 0;
  int failed = 0;
  for (int i = -10; i < iters && !failed; i++) { /* 10 warm-ups: the cache fills */
    double t0 = now_us();
    failed |= ncclAllReduce(buf, buf, bytes / 4, ncclFloat32, ncclSum, comm, stream) != ncclSuccess;
    failed |= cudaStreamSynchronize(stream) != cudaSuccess;
    double t1 = now_us();
    plait_handle_t *h = NULL;
    plait_result_t rc = plait_allreduce_async("bench", &t, &t, PLAIT_OP_SUM, NULL, &h);
    if (rc == PLAIT_SUCCESS) rc = plait_wait(h, 60);
    plait_release(h);
    double t2 = now_us();
    if (rc != PLAIT_SUCCESS) printf("nccl_bench: plait allreduce: %s\n", plait_last_error());
    failed |= rc != PLAIT_SUCCESS;
    if (i >= 0) bare[i] = t1 - t0, api[i] = t2 - t1;
  }
  cudaFree(buf);
  if (!failed) *mb = median(bare, iters), *mp = median(api, iters);
  return failed;
}

/* The child of api_overhead: plait at size 1 beside a bare communicator. */
static int api_child(void) {
  nt_api_env();
  if (plait_init() != PLAIT_SUCCESS) {
    printf("nccl_bench: plait_init: %s\n", plait_last_error());
    return 1;
  }
  ncclComm_t comm;
  cudaStream_t stream;
  int dev = 0;
  if (ncclCommInitAll(&comm, 1, &dev) != ncclSuccess ||
      cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking) != cudaSuccess) {
    printf("nccl_bench: cannot make the bare communicator\n");
    plait_shutdown();
    return 1;
  }
  printf("\nnccl_bench: plait's public API at size 1 (allreduce_async + wait + release of a "
         "device tensor) vs bare ncclAllReduce + cudaStreamSynchronize; medians\n"
         "%12s %8s %12s %12s %12s\n", "bytes", "iters", "bare_us", "plait_us", "overhead_us");
  enum { MAX_ITERS = 400 };
  double bare[MAX_ITERS], api[MAX_ITERS], worst = 0;
  int failed = 0;
  for (size_t bytes = 4; bytes <= g_max && !failed; bytes *= 8) {
    int iters = bytes <= (1u << 20) ? MAX_ITERS : bytes <= (16u << 20) ? 100 : 20;
    double b = 0, p = 0;
    failed = api_size(comm, stream, bytes, iters, bare, api, &b, &p);
    if (failed) break;
    printf("%12zu %8d %12.2f %12.2f %12.2f\n", bytes, iters, b, p, p - b);
    fflush(stdout);
    if (bytes <= (1u << 20) && p - b > worst) worst = p - b;
  }
  if (!failed)
    printf("%s: plait's overhead over bare NCCL up to 1 MiB: at most %.2f us per allreduce "
           "(goal: under 10 us)\n", worst < 10.0 ? "PASS" : "MISS", worst);
  ncclCommDestroy(comm);
  cudaStreamDestroy(stream);
  if (plait_shutdown() != PLAIT_SUCCESS) failed = 1;
  return failed;
}

/* api_child in a process of its own (the parent never touches CUDA). */
static int api_overhead(void) {
  fflush(stdout);
  pid_t pid = fork();
  if (pid < 0) return 1;
  if (pid == 0) _exit(api_child());
  int status = 0;
  if (waitpid(pid, &status, 0) != pid) return 1;
  return !(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

int main(int argc, char **argv) {
  if (argc > 1) g_max = (size_t)strtoull(argv[1], NULL, 0);
  char why[256];
  int gpus = nt_device_count(why, sizeof why);
  if (gpus < 1) {
    printf("SKIP: no GPU here: %s\n", why);
    return NT_SKIP;
  }
  int failed = nt_run(gpus < NT_MAX_RANKS ? gpus : NT_MAX_RANKS, 600, body, NULL);
  failed |= api_overhead();
  return failed ? 1 : 0;
}
