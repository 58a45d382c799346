/*
 * The ofi plugin's liveness check (plugins/ofi/robustness/liveness.c) names a peer dead
 * only when the kernel says there is no such process. A rank that cannot
 * read /proc/<pid>/stat for another reason (here: every file descriptor in
 * use, as a rank under a flood of idle connections would be) while a live
 * peer is paused must wait for it, not declare it lost.
 *
 * The plugin is called directly (no coordinator), as in test_ofi_collectives.c,
 * so that rank 0 is inside the transport's wait while rank 1 is stopped.
 */
#include <criterion/criterion.h>

#include <errno.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "api/core.h"
#include "ofi_job.h"
#include "transport_matrix.h"

#define MAX_FILLER 4096
#define PAUSE_US 500000

static atomic_int *shared; /* [0]: rank 0 has used up its file descriptors */

/* Opens /dev/null until the process's soft fd limit (lowered to 256 when it
 * is higher) is reached; returns how many it opened, fds[] holds them. */
static int use_up_fds(int *fds, struct rlimit *old) {
  getrlimit(RLIMIT_NOFILE, old);
  struct rlimit low = *old;
  if (low.rlim_cur > 256) low.rlim_cur = 256;
  setrlimit(RLIMIT_NOFILE, &low);
  int n = 0;
  while (n < MAX_FILLER) {
    int fd = dup(0);
    if (fd < 0) break;
    fds[n++] = fd;
  }
  return n;
}

static int paused_peer_body(tm_ctx_t *c) {
  if (tm_allreduce_one(c, PLAIT_FLOAT32, PLAIT_OP_SUM, 1001)) return 1; /* connections made */
  if (c->rank == 0) {
    static int fds[MAX_FILLER];
    struct rlimit old;
    int n = use_up_fds(fds, &old);
    FILE *probe = fopen("/proc/self/stat", "r");
    int at_limit = !probe && (errno == EMFILE || errno == ENFILE);
    if (probe) fclose(probe);
    atomic_store(&shared[0], 1);
    int rc = tm_allreduce_one(c, PLAIT_FLOAT32, PLAIT_OP_SUM, 1001);
    for (int i = 0; i < n; i++) close(fds[i]);
    setrlimit(RLIMIT_NOFILE, &old);
    if (!at_limit) {
      plait_test_say(0, "could not use up the file descriptors (%d opened)", n);
      return 1;
    }
    if (rc) plait_test_say(0, "the allreduce failed while rank 1 was paused: %s",
                           plait_last_error());
    return rc;
  }
  while (!atomic_load(&shared[0])) usleep(1000);
  if (c->rank == 1) { /* a helper stops this rank for PAUSE_US, then lets it go on */
    pid_t self = getpid(), helper = fork();
    if (helper < 0) return 1;
    if (helper == 0) {
      kill(self, SIGSTOP);
      usleep(PAUSE_US);
      kill(self, SIGCONT);
      _exit(0);
    }
    int st;
    while (waitpid(helper, &st, 0) < 0 && errno == EINTR) {
    }
  }
  return tm_allreduce_one(c, PLAIT_FLOAT32, PLAIT_OP_SUM, 1001);
}

static void no_coordinator(void) { plait_core_test_without_coordinator(1); }
TestSuite(ofi_liveness, .init = no_coordinator);

static void run_paused(const char *prov, int nranks) {
  ofi_require_plugin();
  shared = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  cr_assert(shared != MAP_FAILED);
  ofi_run_job(prov, nranks, paused_peer_body, NULL);
  munmap(shared, 4096);
}

Test(ofi_liveness, shm_rank_at_its_fd_limit_waits_for_a_paused_peer, .timeout = 90) {
  run_paused("shm", 2);
}
Test(ofi_liveness, tcp_rank_at_its_fd_limit_waits_for_a_paused_peer, .timeout = 90) {
  run_paused("tcp", 3);
}
