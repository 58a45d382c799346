#include "robustness/rescue.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "errors.h"
#include "robustness/liveness.h"

/* The guarded thread's way back, and its state (read by the handler). */
static _Thread_local sigjmp_buf *t_escape;
static _Thread_local ofi_state_t *t_state;
static _Thread_local int t_unblocked;
static _Thread_local int t_tid; /* its kernel thread id, once known */

static pthread_mutex_t install_mu = PTHREAD_MUTEX_INITIALIZER;
static int installed;
static struct sigaction previous;

static void on_signal(int sig, siginfo_t *info, void *uc) {
  ofi_state_t *st = t_state;
  if (t_escape && st && atomic_load(&st->rescue_wanted)) {
    sigjmp_buf *to = t_escape;
    t_escape = NULL;
    siglongjmp(*to, 1);
  }
  /* Not ours: what was there before. */
  if (previous.sa_flags & SA_SIGINFO) {
    if (previous.sa_sigaction) previous.sa_sigaction(sig, info, uc);
  } else if (previous.sa_handler != SIG_DFL && previous.sa_handler != SIG_IGN &&
             previous.sa_handler) {
    previous.sa_handler(sig);
  }
}

static int install(void) {
  pthread_mutex_lock(&install_mu);
  if (!installed) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_signal;
    sa.sa_flags = SA_SIGINFO | SA_NODEFER | SA_RESTART;
    sigemptyset(&sa.sa_mask);
    installed = sigaction(OFI_RESCUE_SIGNAL, &sa, &previous) == 0;
  }
  pthread_mutex_unlock(&install_mu);
  return installed;
}

static double thread_cpu_s(clockid_t clock) {
  struct timespec ts;
  if (clock_gettime(clock, &ts) != 0) return 0;
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* The thread's CPU time in user space (utime, field 14 of
 * /proc/self/task/<tid>/stat, in clock ticks), or -1 when it cannot be read.
 * A spin lock spins there; page faults (direct compaction of huge pages
 * under memory pressure) and the kernel's copies (CMA) inside a libfabric
 * call do not, and are not a reason to abandon the endpoint. */
static double thread_user_s(int tid) {
  char path[64], buf[1024];
  snprintf(path, sizeof path, "/proc/self/task/%d/stat", tid);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  ssize_t n = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (n <= 0) return -1;
  buf[n] = 0;
  const char *p = strrchr(buf, ')'); /* the name may hold spaces and ')' */
  if (!p) return -1;
  for (int field = 2; field < 14 && p; field++) p = strchr(p + 1, ' ');
  if (!p) return -1;
  char *end;
  unsigned long long ticks = strtoull(p + 1, &end, 10);
  long hz = sysconf(_SC_CLK_TCK);
  return end == p + 1 || hz <= 0 ? -1 : (double)ticks / (double)hz;
}

/* What the watchdog counts: user CPU time where /proc tells it, else all. */
static double thread_spin_s(const ofi_state_t *st) {
  double user = thread_user_s(atomic_load(&st->caller_tid));
  return user >= 0 ? user : thread_cpu_s(atomic_load(&st->caller_cpu));
}

static void rescue(ofi_state_t *st, double cpu_s) {
  if (!install()) return;
  st->stuck_cpu_s = cpu_s;
  atomic_store(&st->rescue_wanted, 1);
  pthread_kill(atomic_load(&st->caller), OFI_RESCUE_SIGNAL);
  /* Wait (bounded) until the guarded thread is out; it then stays out. */
  for (int i = 0; i < 200 && atomic_load(&st->inside); i++) {
    struct timespec ts = {0, 10 * 1000 * 1000};
    nanosleep(&ts, NULL);
  }
}

static double wall_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Whether a peer on this host is known to have exited: then the lock it
 * held stays held for ever. */
static int a_local_peer_died(const ofi_state_t *st) {
  for (int r = 0; r < st->nranks; r++) {
    char why[128];
    if (r != st->rank && ofi_peer_gone(st, r, why, sizeof why)) return 1;
  }
  return 0;
}

/* Spinning past OFI_RESCUE_CPU_S: rescue at once when a local peer died
 * holding the lock; otherwise the holder may only be stopped or starved
 * (SIGSTOP, a debugger, a loaded machine) and will let go when it runs
 * again, so wait for it up to the operation timeout (PLAIT_TIMEOUT_S) of
 * spinning, as for any silent peer. */
static int must_rescue(const ofi_state_t *st, double spun_cpu_s, double spun_wall_s) {
  if (spun_cpu_s <= OFI_RESCUE_CPU_S) return 0;
  return spun_wall_s > st->timeout_s || a_local_peer_died(st);
}

static void *watch(void *arg) {
  ofi_state_t *st = arg;
  uint64_t last = 0;
  unsigned seq = 0;
  double cpu_mark = 0, wall_mark = 0;
  int watching = 0;
  while (!atomic_load(&st->rescue_stop)) {
    struct timespec ts = {0, 50 * 1000 * 1000};
    nanosleep(&ts, NULL);
    if (!atomic_load(&st->inside) || atomic_load(&st->rescue_wanted)) {
      watching = 0;
      continue;
    }
    uint64_t turns = atomic_load(&st->turns);
    unsigned now_seq = atomic_load(&st->guard_seq);
    double cpu = thread_spin_s(st);
    /* another session (perhaps on another thread) since the last look: its
     * clock starts a new mark */
    if (!watching || turns != last || now_seq != seq) {
      watching = 1;
      last = turns;
      seq = now_seq;
      cpu_mark = cpu;
      wall_mark = wall_s();
      continue;
    }
    if (must_rescue(st, cpu - cpu_mark, wall_s() - wall_mark)) rescue(st, cpu - cpu_mark);
  }
  return NULL;
}

plait_result_t ofi_rescue_start(ofi_state_t *st) {
  atomic_store(&st->rescue_stop, 0);
  if (pthread_create(&st->rescue_thread, NULL, watch, st) != 0)
    return ofi_fail(st, PLAIT_ERR_SYSTEM, "init: cannot start the ofi watchdog thread");
  st->rescue_started = 1;
  return PLAIT_SUCCESS;
}

void ofi_rescue_stop(ofi_state_t *st) {
  if (!st->rescue_started) return;
  atomic_store(&st->rescue_stop, 1);
  pthread_join(st->rescue_thread, NULL);
  st->rescue_started = 0;
}

void ofi_guard_on(ofi_state_t *st, sigjmp_buf *escape) {
  if (!t_unblocked) { /* the application may have blocked it in this thread */
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, OFI_RESCUE_SIGNAL);
    pthread_sigmask(SIG_UNBLOCK, &set, NULL);
    t_unblocked = 1;
  }
  if (!st->rescue_started) return;
  pthread_t self = pthread_self();
  clockid_t cpu;
  if (pthread_getcpuclockid(self, &cpu) != 0) return;
  atomic_store(&st->caller, self);
  if (!t_tid) t_tid = (int)syscall(SYS_gettid); /* once per thread: this runs per collective */
  atomic_store(&st->caller_tid, t_tid);
  atomic_store(&st->caller_cpu, cpu);
  atomic_fetch_add(&st->guard_seq, 1);
  t_state = st;
  t_escape = escape;
  atomic_store(&st->inside, 1);
}

void ofi_guard_off(ofi_state_t *st) {
  t_escape = NULL;
  t_state = NULL;
  atomic_store(&st->inside, 0);
}

plait_result_t ofi_rescued(ofi_state_t *st) {
  ofi_guard_off(st);
  st->abandoned = 1;
  st->rescued = !st->in_teardown; /* half closed: left open, never parked */
  st->rescued_tid = t_tid; /* this thread: the mutexes it held stay held (orphan_lock.h) */
  char gone[256] = "";
  size_t o = 0;
  for (int r = 0; r < st->nranks && o < sizeof gone - 64; r++) {
    char why[128];
    if (r != st->rank && ofi_peer_gone(st, r, why, sizeof why)) {
      int k = snprintf(gone + o, sizeof gone - o, "%slost rank %d: %s", o ? "; " : "", r, why);
      if (k > 0) o += (size_t)k;
    }
  }
  return ofi_break(st, PLAIT_ERR_PEER_LOST,
                   "%s%sstuck inside libfabric (%s), spinning for %.1f s of CPU on a lock that "
                   "a peer on this host died or stopped holding; this endpoint is abandoned",
                   gone, o ? "; " : "", st->provider, st->stuck_cpu_s);
}
