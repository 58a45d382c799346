#include "nccl_ranks.h"
#include "ranks.h" /* plait_test_clear_env */

#include "plait/dtypes.h"

#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <errno.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* ---- counting devices (in a child: the parent must not initialise CUDA) */

typedef struct probe {
  int count;
  char why[256];
} probe_t;

int nt_device_count(char *why, size_t len) {
  int fds[2];
  if (pipe(fds) != 0) {
    snprintf(why, len, "pipe: %s", strerror(errno));
    return 0;
  }
  pid_t pid = fork();
  if (pid == 0) {
    probe_t p;
    memset(&p, 0, sizeof p);
    cudaError_t e = cudaGetDeviceCount(&p.count);
    if (e != cudaSuccess) {
      p.count = 0;
      snprintf(p.why, sizeof p.why, "cudaGetDeviceCount: %s: %s", cudaGetErrorName(e),
               cudaGetErrorString(e));
    } else if (p.count == 0) {
      snprintf(p.why, sizeof p.why, "cudaGetDeviceCount found no device");
    }
    ssize_t w = write(fds[1], &p, sizeof p);
    _exit(w == (ssize_t)sizeof p ? 0 : 1);
  }
  close(fds[1]);
  probe_t p;
  memset(&p, 0, sizeof p);
  ssize_t n = pid > 0 ? read(fds[0], &p, sizeof p) : -1;
  close(fds[0]);
  if (pid > 0) waitpid(pid, NULL, 0);
  if (n != (ssize_t)sizeof p) {
    snprintf(why, len, "the CUDA probe process died (fork or cudaGetDeviceCount crashed)");
    return 0;
  }
  snprintf(why, len, "%s", p.why);
  return p.count;
}

/* ---- the bootstrap: a star through rank 0 over socketpairs */

typedef struct boot {
  int rank, nranks;
  int fd[NT_MAX_RANKS]; /* rank 0: fd[r] to rank r; others: fd[0] to rank 0 */
} boot_t;

static boot_t g_boot;
static plait_bootstrap_t g_api;

#define IO_LIMIT_MS 120000

static plait_result_t io_full(int fd, void *buf, size_t n, int out) {
  char *p = buf;
  while (n) {
    struct pollfd pf = {fd, (short)(out ? POLLOUT : POLLIN), 0};
    int pr = poll(&pf, 1, IO_LIMIT_MS);
    if (pr == 0) return PLAIT_ERR_PEER_LOST;
    if (pr < 0) {
      if (errno == EINTR) continue;
      return PLAIT_ERR_SYSTEM;
    }
    ssize_t k = out ? write(fd, p, n) : read(fd, p, n);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) return PLAIT_ERR_PEER_LOST;
    p += k;
    n -= (size_t)k;
  }
  return PLAIT_SUCCESS;
}

static plait_result_t boot_allgather(void *ctx, const void *send, size_t bytes, void *recv) {
  boot_t *b = ctx;
  char *r = recv;
  plait_result_t rc = PLAIT_SUCCESS;
  if (b->rank != 0) {
    rc = io_full(b->fd[0], (void *)send, bytes, 1);
    if (rc == PLAIT_SUCCESS) rc = io_full(b->fd[0], r, bytes * (size_t)b->nranks, 0);
    return rc;
  }
  memcpy(r, send, bytes);
  for (int p = 1; p < b->nranks && rc == PLAIT_SUCCESS; p++)
    rc = io_full(b->fd[p], r + (size_t)p * bytes, bytes, 0);
  for (int p = 1; p < b->nranks && rc == PLAIT_SUCCESS; p++)
    rc = io_full(b->fd[p], r, bytes * (size_t)b->nranks, 1);
  return rc;
}

static plait_result_t boot_broadcast(void *ctx, void *buf, size_t bytes, int root) {
  boot_t *b = ctx;
  char *all = malloc(bytes * (size_t)b->nranks + 1);
  if (!all) return PLAIT_ERR_NO_MEMORY;
  plait_result_t rc = boot_allgather(ctx, buf, bytes, all);
  if (rc == PLAIT_SUCCESS) memcpy(buf, all + (size_t)root * bytes, bytes);
  free(all);
  return rc;
}

static plait_result_t boot_barrier(void *ctx) {
  char one = 1, all[NT_MAX_RANKS];
  return boot_allgather(ctx, &one, 1, all);
}

const plait_bootstrap_t *nt_bootstrap(void) { return &g_api; }

/* ---- logging */

static int g_rank;

void nt_say(int rank, const char *fmt, ...) {
  char line[2048];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(line, sizeof line, fmt, ap);
  va_end(ap);
  fprintf(stderr, "[rank %d] %s\n", rank, line);
}

static void log_fn(int level, const char *sub, const char *file, int line, const char *fmt, ...) {
  char msg[2048];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  fprintf(stderr, "[rank %d] plugin log %d %s %s:%d: %s\n", g_rank, level, sub, file, line, msg);
}

/* ---- one rank */

static nt_init_fail_fn g_init_fail; /* nt_run_failing_init's check */

static int rank_main(int rank, int nranks, nt_rank_fn fn, void *arg) {
  g_rank = rank;
  g_boot.rank = rank;
  g_boot.nranks = nranks;
  g_api = (plait_bootstrap_t){.size = sizeof g_api, .ctx = &g_boot, .rank = rank,
                              .nranks = nranks, .allgather = boot_allgather,
                              .broadcast = boot_broadcast, .barrier = boot_barrier};
  void *dl = dlopen(PLAIT_NCCL_PLUGIN, RTLD_NOW | RTLD_LOCAL);
  if (!dl) {
    nt_say(rank, "dlopen %s: %s", PLAIT_NCCL_PLUGIN, dlerror());
    return 1;
  }
  const plait_transport_t *t = dlsym(dl, PLAIT_TRANSPORT_SYMBOL);
  if (!t) {
    nt_say(rank, "%s exports no %s", PLAIT_NCCL_PLUGIN, PLAIT_TRANSPORT_SYMBOL);
    return 1;
  }
  plait_transport_init_args_t a;
  memset(&a, 0, sizeof a);
  a.size = sizeof a;
  a.rank = a.local_rank = rank;
  a.nranks = a.local_size = nranks;
  a.cross_rank = 0;
  a.cross_size = 1;
  a.bootstrap = &g_api;
  a.log = log_fn;
  a.log_level = PLAIT_LOG_WARN;
  a.timeout_s = 60;
  a.host_address = "127.0.0.1";
  void *state = NULL;
  plait_result_t rc = t->init(&a, &state);
  if (g_init_fail) {
    if (rc == PLAIT_SUCCESS) {
      nt_say(rank, "init succeeded where it should have failed");
      t->finalize(state);
      return 1;
    }
    return g_init_fail(rank, nranks, rc, t->last_error(NULL));
  }
  if (rc != PLAIT_SUCCESS) {
    nt_say(rank, "init failed (%s): %s", plait_result_name_inline(rc), t->last_error(NULL));
    return 1;
  }
  int failed = fn(rank, nranks, t, state, arg);
  t->finalize(state);
  return failed;
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int nt_run(int nranks, double timeout_s, nt_rank_fn fn, void *arg) {
  if (nranks < 1 || nranks > NT_MAX_RANKS) return 1;
  int pairs[NT_MAX_RANKS][2];
  for (int r = 1; r < nranks; r++)
    if (socketpair(AF_UNIX, SOCK_STREAM, 0, pairs[r]) != 0) {
      perror("socketpair");
      return 1;
    }
  fflush(stdout);
  fflush(stderr);
  pid_t pids[NT_MAX_RANKS];
  for (int r = 0; r < nranks; r++) {
    pids[r] = fork();
    if (pids[r] == 0) {
      for (int p = 1; p < nranks; p++) {
        if (r == 0) {
          g_boot.fd[p] = pairs[p][0];
          close(pairs[p][1]);
        } else {
          close(pairs[p][0]);
          if (p == r) g_boot.fd[0] = pairs[p][1];
          else close(pairs[p][1]);
        }
      }
      int failed = rank_main(r, nranks, fn, arg);
      fflush(stdout);
      _exit(failed ? 1 : 0);
    }
  }
  for (int r = 1; r < nranks; r++) close(pairs[r][0]), close(pairs[r][1]);
  int bad = 0, left = nranks;
  int done[NT_MAX_RANKS] = {0};
  double end = now_s() + timeout_s;
  while (left > 0) {
    for (int r = 0; r < nranks; r++) {
      int status;
      if (done[r] || pids[r] <= 0 || waitpid(pids[r], &status, WNOHANG) != pids[r]) continue;
      done[r] = 1;
      left--;
      if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        bad = 1;
        fprintf(stderr, "rank %d %s %d\n", r, WIFEXITED(status) ? "exited with" : "killed by signal",
                WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
      }
    }
    if (left > 0 && now_s() > end) {
      fprintf(stderr, "ranks still running after %.0f s: killed (a hang)\n", timeout_s);
      for (int r = 0; r < nranks; r++)
        if (!done[r] && pids[r] > 0) kill(pids[r], SIGKILL), waitpid(pids[r], NULL, 0);
      return 1;
    }
    if (left > 0) usleep(20000);
  }
  return bad;
}

static int never_called(int rank, int nranks, const plait_transport_t *t, void *state,
                        void *arg) {
  (void)rank, (void)nranks, (void)t, (void)state, (void)arg;
  return 1;
}

int nt_run_failing_init(int nranks, double timeout_s, nt_init_fail_fn fn) {
  g_init_fail = fn;
  int rc = nt_run(nranks, timeout_s, never_called, NULL);
  g_init_fail = NULL;
  return rc;
}

/* ---- the public API's environment */

void nt_api_env(void) {
  plait_test_clear_env(); /* tests/harness/ranks.c */
  setenv("PLAIT_TRANSPORT", "nccl", 1);
  setenv("PLAIT_PLUGIN_PATH", PLAIT_NCCL_PLUGIN_DIR, 1);
}
