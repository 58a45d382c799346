/*
 * Benchmark (prints figures, checks nothing about time): what the nccl
 * plugin adds over a bare ncclAllReduce, per collective, over sizes. Both
 * run on the same device and in-place float32 sum; the bare side is
 * ncclAllReduce + cudaStreamSynchronize on its own communicator, the plugin
 * side its allreduce() (checks, an event on the legacy default stream that
 * its stream waits for, enqueue, then poll an event with
 * ncclCommGetAsyncError). One rank per GPU (size 1 on one GPU). Each
 * figure is the median of one-call timings, the two sides interleaved.
 * Usage: nccl_bench [max_bytes]   (default 256 MiB). Exit 77 without a GPU.
 */
#include <nccl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common.h"

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
      plait_result_t rc = t->allreduce(st, buf, count, PLAIT_FLOAT32, PLAIT_OP_SUM);
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

int main(int argc, char **argv) {
  if (argc > 1) g_max = (size_t)strtoull(argv[1], NULL, 0);
  char why[256];
  int gpus = nt_device_count(why, sizeof why);
  if (gpus < 1) {
    printf("SKIP: no GPU here: %s\n", why);
    return NT_SKIP;
  }
  return nt_run(gpus < NT_MAX_RANKS ? gpus : NT_MAX_RANKS, 600, body, NULL) ? 1 : 0;
}
