/*
 * The control plane across real processes on loopback: joining, topology,
 * the bootstrap collectives, intruders that must be refused without harming
 * the job, and ranks that die or go silent. Uses the "fixture" test plugin,
 * whose init itself checks the bootstrap. The coordinator is not started
 * (plait_core_test_without_coordinator), so the tests can drive the bootstrap
 * themselves after init; tests/faults/test_failures.c covers lost ranks under the
 * coordinator.
 */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <errno.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "api/core.h"
#include "plait/plait.h"
#include "ranks.h"

#define FAIL(...)                                                              \
  do {                                                                         \
    plait_test_say(rank, __VA_ARGS__);                                         \
    return 1;                                                                  \
  } while (0)

#define EXPECT_OK(call)                                                        \
  do {                                                                         \
    plait_result_t rc_ = (call);                                               \
    if (rc_ != PLAIT_SUCCESS)                                                  \
      FAIL("%s -> %s: %s", #call, plait_result_name(rc_), plait_last_error()); \
  } while (0)

static const char *fixture_env[] = {"PLAIT_TRANSPORT=fixture", NULL};

static void setup(void) { plait_core_test_without_coordinator(1); }
TestSuite(control, .init = setup);

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Connects a raw TCP socket to the job's rendezvous, retrying for 5 s. */
static int raw_connect(void) {
  const char *rv = getenv("PLAIT_RENDEZVOUS");
  int port = atoi(strrchr(rv, ':') + 1);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  for (int i = 0; i < 500; i++) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (connect(fd, (struct sockaddr *)&a, sizeof a) == 0) return fd;
    close(fd);
    usleep(10000);
  }
  return -1;
}

/* Reads until the peer closes; 1 if it closed within 15 s. */
static int closed_by_peer(int fd) {
  struct timeval tv = {15, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  char buf[256];
  ssize_t n;
  while ((n = read(fd, buf, sizeof buf)) > 0) {
  }
  /* closing with our unread bytes pending makes the kernel send a reset */
  return n == 0 || (n < 0 && errno == ECONNRESET);
}

/* ---------- joining, queries, bootstrap ---------- */

static int check_bootstrap(int rank, int n) {
  const plait_bootstrap_t *b = plait_core_bootstrap();
  if (!b) FAIL("no bootstrap");
  size_t sizes[] = {0, 1, 7, 4096, 1 << 20};
  for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
    size_t len = sizes[s];
    unsigned char *mine = malloc(len + 1), *all = malloc(len * (size_t)n + 1);
    for (size_t i = 0; i < len; i++) mine[i] = (unsigned char)(rank * 31 + i);
    EXPECT_OK(b->allgather(b->ctx, mine, len, all));
    for (int r = 0; r < n; r++)
      for (size_t i = 0; i < len; i++)
        if (all[(size_t)r * len + i] != (unsigned char)(r * 31 + i))
          FAIL("allgather of %zu: byte %zu of rank %d wrong", len, i, r);
    for (int root = 0; root < n; root++) {
      for (size_t i = 0; i < len; i++) mine[i] = rank == root ? (unsigned char)(root + i) : 0;
      EXPECT_OK(b->broadcast(b->ctx, mine, len, root));
      for (size_t i = 0; i < len; i++)
        if (mine[i] != (unsigned char)(root + i)) FAIL("broadcast %zu from %d wrong", len, root);
    }
    free(mine);
    free(all);
  }
  EXPECT_OK(b->barrier(b->ctx));
  if (b->broadcast(b->ctx, NULL, 4, 0) != PLAIT_ERR_INVALID_ARGUMENT) FAIL("NULL accepted");
  if (b->broadcast(b->ctx, &n, sizeof n, n) != PLAIT_ERR_INVALID_ARGUMENT) FAIL("bad root accepted");
  return 0;
}

static int join_and_query(int rank, int n, void *arg) {
  (void)arg;
  for (int round = 0; round < 2; round++) { /* init works again after shutdown */
    EXPECT_OK(plait_init());
    int v;
    const char *name;
    EXPECT_OK(plait_rank(&v));
    if (v != rank) FAIL("rank %d", v);
    EXPECT_OK(plait_size(&v));
    if (v != n) FAIL("size %d", v);
    EXPECT_OK(plait_local_rank(&v));
    if (v != rank) FAIL("local rank %d", v);
    EXPECT_OK(plait_local_size(&v));
    if (v != n) FAIL("local size %d", v);
    EXPECT_OK(plait_cross_rank(&v));
    if (v != 0) FAIL("cross rank %d", v);
    EXPECT_OK(plait_cross_size(&v));
    if (v != 1) FAIL("cross size %d", v);
    EXPECT_OK(plait_transport_name(&name));
    if (strcmp(name, "fixture")) FAIL("transport %s", name);
    if (check_bootstrap(rank, n)) return 1;
    EXPECT_OK(plait_shutdown());
  }
  return 0;
}

Test(control, join_query_bootstrap_2_3_4_ranks, .timeout = 120) {
  for (int n = 2; n <= 4; n++) {
    plait_test_job_t job = {.nranks = n, .timeout_s = 60, .env = fixture_env};
    cr_assert_eq(plait_test_run_ranks(&job, join_and_query, NULL), 0, "%d ranks", n);
  }
}

/* Two simulated hosts; local ranks not given: derived from host identity. */
static int two_hosts(int rank, int n, void *arg) {
  (void)n, (void)arg;
  unsetenv("PLAIT_LOCAL_RANK");
  unsetenv("PLAIT_LOCAL_SIZE");
  setenv("PLAIT_HOSTNAME", rank < 3 ? "host-a" : "host-b", 1); /* 3 + 2 ranks */
  EXPECT_OK(plait_init());
  int lr, ls, cr, cs;
  EXPECT_OK(plait_local_rank(&lr));
  EXPECT_OK(plait_local_size(&ls));
  EXPECT_OK(plait_cross_rank(&cr));
  EXPECT_OK(plait_cross_size(&cs));
  int want_lr = rank < 3 ? rank : rank - 3, want_ls = rank < 3 ? 3 : 2;
  /* Horovod: cross_rank indexes the ranks with the same local rank */
  int want_cr = rank < 3 ? 0 : 1, want_cs = want_lr < 2 ? 2 : 1;
  if (lr != want_lr || ls != want_ls || cr != want_cr || cs != want_cs)
    FAIL("local %d/%d cross %d/%d, expected %d/%d %d/%d", lr, ls, cr, cs, want_lr, want_ls,
         want_cr, want_cs);
  EXPECT_OK(plait_shutdown());
  return 0;
}

Test(control, local_and_cross_from_host_identity, .timeout = 60) {
  plait_test_job_t job = {.nranks = 5, .timeout_s = 40, .env = fixture_env};
  cr_assert_eq(plait_test_run_ranks(&job, two_hosts, NULL), 0);
}

/* ---------- intruders are refused; the job completes ---------- */

typedef enum { WRONG_SECRET, GARBAGE, OVERSIZED, SILENT, WRONG_SIZE } intruder_t;

/* Runs in a child of rank 1 before rank 1 joins; exit 0 = refused as it should be. */
static int intrude(intruder_t kind) {
  if (kind == WRONG_SECRET || kind == WRONG_SIZE) {
    if (kind == WRONG_SECRET) setenv("PLAIT_SECRET", "not-the-job-secret-at-all-0123456789", 1);
    if (kind == WRONG_SIZE) setenv("PLAIT_SIZE", "3", 1);
    setenv("PLAIT_START_TIMEOUT_S", "10", 1);
    plait_result_t rc = plait_init();
    const char *want = kind == WRONG_SECRET ? "does not know this job's PLAIT_SECRET"
                                            : "job size mismatch";
    if (rc != PLAIT_ERR_AUTH || !strstr(plait_last_error(), want)) {
      fprintf(stderr, "intruder: got %s: %s\n", plait_result_name(rc), plait_last_error());
      return 1;
    }
    return 0;
  }
  int fd = raw_connect();
  if (fd < 0) return 1;
  if (kind == GARBAGE) {
    const char *junk = "GET / HTTP/1.1\r\nHost: x\r\n\r\n";
    if (write(fd, junk, strlen(junk)) < 0) return 1;
  } else if (kind == OVERSIZED) { /* a valid header announcing 1 GiB */
    unsigned char h[12] = {'P', 'L', 'T', '1', 2, 0, 2, 0, 0, 0, 0, 0x40};
    if (write(fd, h, sizeof h) < 0) return 1;
  } else { /* SILENT: stay connected, say nothing; must not hold up the job */
    return 0; /* the fd stays open in the parent's copy below */
  }
  int ok = closed_by_peer(fd);
  close(fd);
  return ok ? 0 : 1;
}

static int with_intruder(int rank, int n, void *arg) {
  (void)n;
  intruder_t kind = *(intruder_t *)arg;
  int silent_fd = -1;
  if (rank == 1) {
    if (kind == SILENT) {
      silent_fd = raw_connect();
      if (silent_fd < 0) FAIL("could not connect the silent socket");
    } else {
      pid_t pid = fork();
      if (pid == 0) _exit(intrude(kind));
      int st;
      waitpid(pid, &st, 0);
      if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) FAIL("intruder %d was not refused", kind);
    }
  }
  double t0 = now();
  EXPECT_OK(plait_init());
  if (check_bootstrap(rank, n)) return 1;
  EXPECT_OK(plait_shutdown());
  if (kind == SILENT && now() - t0 > 5) FAIL("a silent connection held the job %.1f s", now() - t0);
  if (silent_fd >= 0) close(silent_fd);
  return 0;
}

static void run_intruder(intruder_t kind) {
  plait_test_job_t job = {.nranks = 2, .timeout_s = 60, .env = fixture_env};
  cr_assert_eq(plait_test_run_ranks(&job, with_intruder, &kind), 0, "intruder kind %d", kind);
}

Test(control, wrong_secret_is_refused, .timeout = 60) { run_intruder(WRONG_SECRET); }
Test(control, garbage_bytes_are_refused, .timeout = 60) { run_intruder(GARBAGE); }
Test(control, oversized_frame_is_refused, .timeout = 60) { run_intruder(OVERSIZED); }
Test(control, silent_connection_does_not_block, .timeout = 60) { run_intruder(SILENT); }
Test(control, wrong_job_size_is_refused, .timeout = 60) { run_intruder(WRONG_SIZE); }

/* A second process claiming an admitted rank is refused. Job of 3: rank 1
 * joins at once, the twin tries 1 s later, rank 2 joins after it. */
static int duplicate(int rank, int n, void *arg) {
  (void)n, (void)arg;
  if (rank == 2) {
    usleep(1000000);
    pid_t pid = fork();
    if (pid == 0) {
      setenv("PLAIT_RANK", "1", 1);
      plait_result_t rc = plait_init();
      int ok = rc == PLAIT_ERR_AUTH && strstr(plait_last_error(), "already joined");
      if (!ok) fprintf(stderr, "twin: %s: %s\n", plait_result_name(rc), plait_last_error());
      _exit(ok ? 0 : 1);
    }
    int st;
    waitpid(pid, &st, 0);
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) FAIL("duplicate rank 1 was not refused");
  }
  EXPECT_OK(plait_init());
  if (check_bootstrap(rank, n)) return 1;
  EXPECT_OK(plait_shutdown());
  return 0;
}

Test(control, duplicate_rank_is_refused, .timeout = 60) {
  plait_test_job_t job = {.nranks = 3, .timeout_s = 40, .env = fixture_env};
  cr_assert_eq(plait_test_run_ranks(&job, duplicate, NULL), 0);
}

/* ---------- lost ranks: an error naming the rank, never a hang ---------- */

typedef struct {
  int victim;
  int how; /* SIGKILL or SIGSTOP */
} loss_t;

static int lose_one(int rank, int n, void *arg) {
  (void)n;
  loss_t *l = arg;
  EXPECT_OK(plait_init());
  const plait_bootstrap_t *b = plait_core_bootstrap();
  EXPECT_OK(b->barrier(b->ctx));
  if (rank == l->victim) raise(l->how);
  double t0 = now();
  plait_result_t rc = b->barrier(b->ctx);
  double took = now() - t0;
  char want[32];
  snprintf(want, sizeof want, "rank %d", l->victim);
  if (rc != PLAIT_ERR_PEER_LOST || !strstr(plait_last_error(), want))
    FAIL("barrier after losing rank %d: %s: %s", l->victim, plait_result_name(rc),
         plait_last_error());
  plait_test_say(rank, "lost rank %d noticed in %.2f s: %s", l->victim, took, plait_last_error());
  /* PLAIT_TIMEOUT_S=2: a dead rank is seen at once, a silent one after ~2 s */
  if (took > 6) FAIL("took %.1f s to notice", took);
  /* later calls fail at once with the same error */
  t0 = now();
  if (b->barrier(b->ctx) != PLAIT_ERR_PEER_LOST || now() - t0 > 0.5) FAIL("not sticky");
  plait_shutdown();
  return 0;
}

static void run_loss(int victim, int how) {
  const char *env[] = {"PLAIT_TRANSPORT=fixture", "PLAIT_TIMEOUT_S=2", NULL};
  /* a stopped victim never exits: the harness kills it after 12 s */
  plait_test_job_t job = {.nranks = 3, .timeout_s = 12, .env = env};
  loss_t l = {victim, how};
  plait_test_run_ranks(&job, lose_one, &l);
  for (int r = 0; r < 3; r++) {
    if (r == victim) continue;
    cr_assert_eq(job.exit_code[r], 0, "rank %d failed after losing rank %d", r, victim);
    cr_assert_lt(job.elapsed_s[r], 10, "rank %d took %.1f s", r, job.elapsed_s[r]);
  }
}

Test(control, killed_rank_is_named_at_once, .timeout = 60) { run_loss(2, SIGKILL); }
Test(control, killed_rank0_is_named, .timeout = 60) { run_loss(0, SIGKILL); }
Test(control, silent_rank_is_named_after_timeout, .timeout = 60) { run_loss(1, SIGSTOP); }

/* ---------- start-up failures ---------- */

static int rank1_never_comes(int rank, int n, void *arg) {
  (void)n, (void)arg;
  if (rank == 1) return 0;
  double t0 = now();
  plait_result_t rc = plait_init();
  if (rc != PLAIT_ERR_TIMEOUT || !strstr(plait_last_error(), "rank 1 did not join"))
    FAIL("%s: %s", plait_result_name(rc), plait_last_error());
  if (now() - t0 > 5) FAIL("start timeout of 1 s took %.1f s", now() - t0);
  return 0;
}

static int rank0_never_comes(int rank, int n, void *arg) {
  (void)n, (void)arg;
  if (rank == 0) return 0;
  plait_result_t rc = plait_init();
  if (rc != PLAIT_ERR_TIMEOUT || !strstr(plait_last_error(), "could not join rank 0"))
    FAIL("%s: %s", plait_result_name(rc), plait_last_error());
  return 0;
}

Test(control, start_timeout_names_missing_ranks, .timeout = 60) {
  const char *env[] = {"PLAIT_TRANSPORT=fixture", "PLAIT_START_TIMEOUT_S=1", NULL};
  plait_test_job_t job = {.nranks = 2, .timeout_s = 20, .env = env};
  cr_assert_eq(plait_test_run_ranks(&job, rank1_never_comes, NULL), 0);
  cr_assert_eq(plait_test_run_ranks(&job, rank0_never_comes, NULL), 0);
}

/* PLAIT_TIMEOUT_S=1: ranks that joined would blame a silent rank 0 after 3 s.
 * Rank 0 beats while it waits for a rank that is slow to start, so a rank
 * that comes after 4 s (within PLAIT_START_TIMEOUT_S) finds a working job. */
static int slow_rank2(int rank, int n, void *arg) {
  (void)n, (void)arg;
  if (rank == 2) sleep(4);
  EXPECT_OK(plait_init());
  const plait_bootstrap_t *b = plait_core_bootstrap();
  EXPECT_OK(b->barrier(b->ctx));
  EXPECT_OK(plait_shutdown());
  return 0;
}

Test(control, joined_ranks_wait_for_a_slow_one_without_blaming_rank0, .timeout = 60) {
  const char *env[] = {"PLAIT_TRANSPORT=fixture", "PLAIT_TIMEOUT_S=1", "PLAIT_START_TIMEOUT_S=30",
                       NULL};
  plait_test_job_t job = {.nranks = 3, .timeout_s = 40, .env = env};
  cr_assert_eq(plait_test_run_ranks(&job, slow_rank2, NULL), 0);
}

/* A rank that never comes is named by every rank that joined, at rank 0's
 * start deadline: none of them blames rank 0 first. */
static int rank2_never_comes(int rank, int n, void *arg) {
  (void)n, (void)arg;
  if (rank == 2) return 0;
  double t0 = now();
  plait_result_t rc = plait_init();
  if (rc != PLAIT_ERR_TIMEOUT || !strstr(plait_last_error(), "rank 2 did not join"))
    FAIL("%s: %s", plait_result_name(rc), plait_last_error());
  if (now() - t0 < 4.5 || now() - t0 > 15)
    FAIL("a start timeout of 5 s ended after %.1f s", now() - t0);
  return 0;
}

Test(control, a_missing_rank_is_named_by_the_ranks_that_joined, .timeout = 60) {
  const char *env[] = {"PLAIT_TRANSPORT=fixture", "PLAIT_TIMEOUT_S=1", "PLAIT_START_TIMEOUT_S=5",
                       NULL};
  plait_test_job_t job = {.nranks = 3, .timeout_s = 40, .env = env};
  cr_assert_eq(plait_test_run_ranks(&job, rank2_never_comes, NULL), 0);
}

static int no_secret(int rank, int n, void *arg) {
  (void)n, (void)arg;
  unsetenv("PLAIT_SECRET");
  plait_result_t rc = plait_init();
  if (rc != PLAIT_ERR_CONFIG || !strstr(plait_last_error(), "PLAIT_SECRET is not set"))
    FAIL("%s: %s", plait_result_name(rc), plait_last_error());
  return 0;
}

Test(control, job_without_secret_is_refused, .timeout = 30) {
  plait_test_job_t job = {.nranks = 2, .timeout_s = 20, .env = fixture_env};
  cr_assert_eq(plait_test_run_ranks(&job, no_secret, NULL), 0);
}

static int mismatched_bootstrap(int rank, int n, void *arg) {
  (void)n, (void)arg;
  EXPECT_OK(plait_init());
  const plait_bootstrap_t *b = plait_core_bootstrap();
  char buf[64] = {0}, all[256];
  plait_result_t rc = b->allgather(b->ctx, buf, rank == 1 ? 8 : 4, all);
  if (rc != PLAIT_ERR_PROTOCOL || !strstr(plait_last_error(), "rank 1 called allgather"))
    FAIL("%s: %s", plait_result_name(rc), plait_last_error());
  EXPECT_OK(plait_shutdown()); /* the job itself survives a caught mismatch */
  return 0;
}

Test(control, bootstrap_mismatch_names_the_rank, .timeout = 30) {
  plait_test_job_t job = {.nranks = 3, .timeout_s = 20, .env = fixture_env};
  cr_assert_eq(plait_test_run_ranks(&job, mismatched_bootstrap, NULL), 0);
}
