/*
 * The elastic rendezvous, real code on both sides: this process is the
 * driver (src/plaitrun/elastic/rendezvous.c, the server plaitrun runs), and
 * workers are forked processes calling plait_init with PLAIT_ELASTIC_DRIVER
 * set (src/control/elastic_client.c), running allreduces on gloo. Also the
 * elastic messages' decoders and the MAC's epoch and labels, as units.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "control/auth.h"
#include "control/elastic_client.h"
#include "control/elastic_wire.h"
#include "control/messages.h"
#include "control/net.h"
#include "failure_helpers.h"
#include "plait/elastic.h"
#include "rendezvous.h"

TestSuite(elastic_rdv, .init = clean_plait_env);

#define MAX_W 4

static plaitrun_rdv_t *R;
static char secret[65];

static void open_driver_on(const char *host) {
  char err[256];
  plait_test_make_secret(secret);
  cr_assert_eq(plaitrun_rdv_open(&R, host, secret, err, sizeof err), 0, "%s", err);
}

static void open_driver(void) { open_driver_on("127.0.0.1"); }

/* Polls and services the rendezvous for up to s seconds. */
static void pump(double s) {
  double until = now() + s;
  do {
    struct pollfd fds[64];
    int n = plaitrun_rdv_pollfds(R, fds, 64);
    poll(fds, (nfds_t)n, 20);
    plaitrun_rdv_service(R, fds, n);
  } while (now() < until);
}

/* Services until n JOINs wait (sorted by worker name), at most 30 s. */
static void await_joins(int n, plaitrun_rdv_join_t *out) {
  double until = now() + 30;
  int got = 0;
  while ((got = plaitrun_rdv_pending(R, out, MAX_W)) < n && now() < until) pump(0.02);
  cr_assert_eq(got, n, "%d JOINs came, %d expected", got, n);
  for (int i = 0; i < n; i++)
    for (int k = i + 1; k < n; k++)
      if (strcmp(out[k].worker, out[i].worker) < 0) {
        plaitrun_rdv_join_t t = out[i];
        out[i] = out[k];
        out[k] = t;
      }
}

/* Answers n JOINs with a job of epoch on one host; order[r] is the join
 * given rank r. */
static void assign(const plaitrun_rdv_join_t *j, int n, uint64_t epoch, const int *order) {
  for (int r = 0; r < n; r++) {
    plaitrun_rdv_assign_t a = {epoch, r, n, r, n, 0, 1, ""};
    snprintf(a.rendezvous, sizeof a.rendezvous, "%s", j[order[0]].rendezvous); /* rank 0's */
    cr_assert_eq(plaitrun_rdv_assign(R, j[order[r]].worker, &a), 0, "assigning %s",
                 j[order[r]].worker);
  }
}

typedef int (*worker_fn)(int w, void *arg);

/* Forks worker w ("host/w"), with the driver's address and the secret
 * (want_secret NULL: the job's). */
static pid_t spawn(int w, worker_fn fn, void *arg, const char *use_secret) {
  char name[32], driver[PLAITRUN_ADDR_MAX + 32];
  snprintf(name, sizeof name, "host/%d", w);
  snprintf(driver, sizeof driver, "%s", plaitrun_rdv_address(R));
  fflush(NULL);
  pid_t pid = fork();
  cr_assert_geq(pid, 0);
  if (pid) return pid;
  struct pollfd fds[64]; /* the driver's sockets are not the worker's */
  int n = plaitrun_rdv_pollfds(R, fds, 64);
  for (int i = 0; i < n; i++) close(fds[i].fd);
  setenv("PLAIT_ELASTIC_DRIVER", driver, 1);
  setenv("PLAIT_ELASTIC_WORKER", name, 1);
  setenv("PLAIT_SECRET", use_secret ? use_secret : secret, 1);
  setenv("PLAIT_TRANSPORT", "gloo", 1);
  setenv("PLAIT_START_TIMEOUT_S", "20", 1);
  setenv("PLAIT_ELASTIC_TIMEOUT_S", "30", 1);
  setenv("PLAIT_TIMEOUT_S", "10", 1);
  plait_test_set_plugin_path();
  _exit(fn(w, arg));
}

/* Services the rendezvous until pid exits (at most limit_s); its exit code,
 * -1 when it was killed. */
static int reap(pid_t pid, double limit_s) {
  double until = now() + limit_s;
  int status;
  for (;;) {
    pid_t got = waitpid(pid, &status, WNOHANG);
    if (got == pid) break;
    if (now() > until) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      cr_log_error("worker %d still ran after %.0f s: killed", (int)pid, limit_s);
      return -1;
    }
    if (R) pump(0.02);
    else usleep(20000);
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/* stderr into a file while fn runs in this process: what the driver logs. */
static int saved_stderr = -1;
static char log_path[64];
static void capture_stderr(void) {
  snprintf(log_path, sizeof log_path, "/tmp/plait_rdv_log_%d", (int)getpid());
  int fd = open(log_path, O_CREAT | O_TRUNC | O_RDWR, 0600);
  cr_assert_geq(fd, 0);
  fflush(stderr);
  saved_stderr = dup(2);
  dup2(fd, 2);
  close(fd);
}
static char *release_stderr(void) {
  fflush(stderr);
  dup2(saved_stderr, 2);
  close(saved_stderr);
  static char text[8192];
  FILE *f = fopen(log_path, "r");
  size_t n = f ? fread(text, 1, sizeof text - 1, f) : 0;
  text[n] = '\0';
  if (f) fclose(f);
  unlink(log_path);
  fprintf(stderr, "%s", text); /* still shown */
  return text;
}

static int reduce_once(int rank, int n, const char *name) {
  float x[3] = {(float)rank + 1, 1, 2};
  EXPECT_OK(allreduce_wait(name, x, 3, 20));
  if (x[0] != (float)(n * (n + 1) / 2) || x[1] != (float)n || x[2] != (float)(2 * n))
    FAIL("%s: got %g %g %g", name, (double)x[0], (double)x[1], (double)x[2]);
  return 0;
}

/* Joins epoch 1, reduces, shuts down, re-joins: epoch 2 reduces too. */
static int two_epochs(int w, void *arg) {
  (void)arg;
  int rank = w, size = 0;
  int enabled = 0;
  EXPECT_OK(plait_elastic_enabled(&enabled));
  if (!enabled) FAIL("plait_elastic_enabled says 0 with PLAIT_ELASTIC_DRIVER set");
  for (uint64_t want = 1; want <= 2; want++) {
    EXPECT_OK(plait_init());
    uint64_t epoch = 0;
    EXPECT_OK(plait_elastic_epoch(&epoch));
    EXPECT_OK(plait_rank(&rank));
    EXPECT_OK(plait_size(&size));
    if (epoch != want || size != 2) FAIL("epoch %llu size %d", (unsigned long long)epoch, size);
    int cross = -1, local = -1;
    EXPECT_OK(plait_cross_size(&cross));
    EXPECT_OK(plait_local_size(&local));
    if (cross != 1 || local != 2) FAIL("cross size %d, local size %d", cross, local);
    if (reduce_once(rank, size, want == 1 ? "a" : "b")) return 1;
    EXPECT_OK(plait_shutdown());
    int removed = 1;
    EXPECT_OK(plait_elastic_removed(&removed));
    if (removed) FAIL("plait_elastic_removed says 1 after a place was given");
  }
  return 0;
}

Test(elastic_rdv, two_workers_two_epochs, .timeout = 120) {
  open_driver();
  pid_t pid[2];
  for (int w = 0; w < 2; w++) pid[w] = spawn(w, two_epochs, NULL, NULL);
  plaitrun_rdv_join_t j[MAX_W];
  await_joins(2, j);
  cr_expect_eq(j[0].last_epoch, 0);
  cr_expect_eq(j[1].last_epoch, 0);
  cr_expect_str_eq(j[0].worker, "host/0");
  cr_expect(!strncmp(j[0].rendezvous, "127.0.0.1:", 10), "%s", j[0].rendezvous);
  assign(j, 2, 1, (int[]){0, 1});
  await_joins(2, j);
  cr_expect_eq(j[0].last_epoch, 1, "a re-joining worker names the epoch it ran in");
  cr_expect_eq(j[1].last_epoch, 1);
  cr_expect_eq(j[0].n_lost + j[1].n_lost, 0);
  assign(j, 2, 2, (int[]){1, 0}); /* the other worker's socket is rank 0's now */
  for (int w = 0; w < 2; w++) cr_expect_eq(reap(pid[w], 60), 0, "worker %d", w);
  plaitrun_rdv_close(R);
}

/* One epoch over IPv6: the driver's address, the JOIN's and the control
 * plane's are all "[::1]:port". */
static int one_epoch(int w, void *arg) {
  (void)arg;
  int rank = w, size = 0;
  EXPECT_OK(plait_init());
  EXPECT_OK(plait_rank(&rank));
  EXPECT_OK(plait_size(&size));
  if (reduce_once(rank, size, "v6")) return 1;
  EXPECT_OK(plait_shutdown());
  return 0;
}

Test(elastic_rdv, over_ipv6, .timeout = 60) {
  int probe = -1;
  if (plait_net_listen("::1", 0, &probe) != PLAIT_SUCCESS)
    cr_skip_test("no IPv6 loopback here: %s", plait_last_error());
  plait_net_close(&probe);
  open_driver_on("::1");
  cr_assert(!strncmp(plaitrun_rdv_address(R), "[::1]:", 6), "%s", plaitrun_rdv_address(R));
  pid_t pid[2];
  for (int w = 0; w < 2; w++) pid[w] = spawn(w, one_epoch, NULL, NULL);
  plaitrun_rdv_join_t j[MAX_W];
  await_joins(2, j);
  cr_expect(!strncmp(j[1].rendezvous, "[::1]:", 6), "%s", j[1].rendezvous);
  assign(j, 2, 1, (int[]){1, 0});
  for (int w = 0; w < 2; w++) cr_expect_eq(reap(pid[w], 40), 0, "worker %d", w);
  plaitrun_rdv_close(R);
}

static int expect_stop(int w, void *arg) {
  (void)arg;
  int rank = w, removed = -1;
  EXPECT_OK(plait_elastic_removed(&removed));
  if (removed) FAIL("removed before asking");
  plait_result_t rc = plait_init();
  EXPECT_ERR(rc, PLAIT_ERR_SHUTDOWN, "host/0", "no place", "its host left the host list",
             "elastic driver at 127.0.0.1:");
  EXPECT_OK(plait_elastic_removed(&removed));
  if (removed != 1) FAIL("plait_elastic_removed says %d after STOP", removed);
  int up = 1;
  EXPECT_OK(plait_is_initialized(&up));
  if (up) FAIL("initialized after STOP");
  return 0;
}

Test(elastic_rdv, stop_removes_the_worker, .timeout = 60) {
  open_driver();
  pid_t pid = spawn(0, expect_stop, NULL, NULL);
  plaitrun_rdv_join_t j[MAX_W];
  await_joins(1, j);
  cr_assert_eq(plaitrun_rdv_stop(R, "host/0", "its host left the host list"), 0);
  cr_expect_eq(plaitrun_rdv_stop(R, "host/0", "again"), -1, "a JOIN is answered once");
  cr_expect_eq(reap(pid, 30), 0);
  plaitrun_rdv_close(R);
}

static int expect_refused(int w, void *arg) {
  (void)arg;
  int rank = w;
  plait_result_t rc = plait_init();
  EXPECT_ERR(rc, PLAIT_ERR_AUTH, "elastic driver at 127.0.0.1:", "refused worker host/0",
             "PLAIT_SECRET");
  return 0;
}

Test(elastic_rdv, wrong_secret_refused_on_both_sides, .timeout = 60) {
  open_driver();
  capture_stderr();
  pid_t pid = spawn(0, expect_refused, NULL, "not-the-job-secret-at-all-0123456789");
  int code = reap(pid, 30);
  char *log = release_stderr();
  cr_expect_eq(code, 0);
  cr_expect(strstr(log, "plaitrun elastic: refused connection from 127.0.0.1:") &&
                strstr(log, "does not know this job's PLAIT_SECRET"),
            "the driver logs the refusal naming the peer: %s", log);
  plaitrun_rdv_join_t j[MAX_W];
  cr_expect_eq(plaitrun_rdv_pending(R, j, MAX_W), 0);
  plaitrun_rdv_close(R);
}

static int rank0_of_epoch2(int w, void *arg) {
  (void)arg;
  int rank = w;
  setenv("PLAIT_START_TIMEOUT_S", "4", 1);
  plait_result_t rc = plait_init(); /* waits for rank 1, which is of epoch 1: none comes */
  EXPECT_ERR(rc, PLAIT_ERR_TIMEOUT, "rank 1");
  return 0;
}

static int late_of_epoch1(int w, void *arg) {
  (void)arg;
  int rank = w;
  plait_result_t rc = plait_init();
  EXPECT_ERR(rc, PLAIT_ERR_AUTH, "epoch 1", "epoch 2", "a late worker of an earlier elastic job");
  return 0;
}

Test(elastic_rdv, a_process_of_another_epoch_is_refused, .timeout = 90) {
  open_driver();
  pid_t p0 = spawn(0, rank0_of_epoch2, NULL, NULL);
  plaitrun_rdv_join_t j0[MAX_W], j1[MAX_W];
  await_joins(1, j0);
  plaitrun_rdv_assign_t a = {2, 0, 2, 0, 2, 0, 1, ""};
  snprintf(a.rendezvous, sizeof a.rendezvous, "%s", j0[0].rendezvous);
  cr_assert_eq(plaitrun_rdv_assign(R, "host/0", &a), 0);
  pid_t p1 = spawn(1, late_of_epoch1, NULL, NULL);
  await_joins(1, j1);
  plaitrun_rdv_assign_t b = {1, 1, 2, 1, 2, 0, 1, ""};
  snprintf(b.rendezvous, sizeof b.rendezvous, "%s", j0[0].rendezvous);
  cr_assert_eq(plaitrun_rdv_assign(R, "host/1", &b), 0);
  cr_expect_eq(reap(p1, 40), 0, "the late worker is refused naming both epochs");
  cr_expect_eq(reap(p0, 40), 0, "rank 0 of epoch 2 is not joined by it");
  plaitrun_rdv_close(R);
}

/* A job of one: POLL's answer, and the lost ranks noted for the next JOIN. */
static int poll_and_note(int w, void *arg) {
  shared_t *sh = arg;
  int rank = w;
  EXPECT_OK(plait_init());
  uint64_t ts = 0;
  unsigned up = 0;
  EXPECT_OK(plait_elastic_host_updates(&ts, &up));
  if (ts != 7 || up != PLAIT_HOSTS_ADDED) FAIL("POLL gave %llu/%u", (unsigned long long)ts, up);
  atomic_store(&sh->flag[0], 1);
  if (!await_flag(&sh->flag[1], 1, 20)) FAIL("the driver did not move on");
  EXPECT_OK(plait_elastic_host_updates(&ts, &up)); /* the driver's job is epoch 2 now */
  if (ts != 8 || up != PLAIT_HOSTS_REMOVED)
    FAIL("POLL of an old epoch gave %llu/%u", (unsigned long long)ts, up);
  /* what plait_control_fail notes when a job of 4 fails naming ranks */
  plait_el_note_failure(1, 4, "ranks 1, 3 were lost: silent for 9.0 s (PLAIT_TIMEOUT_S=9)");
  plait_el_note_failure(1, 4, "rank 2 was lost: connection closed; rank 9 was lost");
  plait_el_note_failure(5, 4, "rank 0 was lost: not of this epoch");
  EXPECT_OK(plait_shutdown());
  EXPECT_OK(plait_init()); /* its JOIN carries 1, 3, 2 */
  EXPECT_OK(plait_shutdown());
  return 0;
}

Test(elastic_rdv, poll_and_lost_ranks, .timeout = 60) {
  open_driver();
  shared_t *sh = shared_new();
  plaitrun_rdv_set_updates(R, 1, 7, PLAIT_HOSTS_ADDED);
  pid_t pid = spawn(0, poll_and_note, sh, NULL);
  plaitrun_rdv_join_t j[MAX_W];
  await_joins(1, j);
  assign(j, 1, 1, (int[]){0});
  double until = now() + 30;
  while (!atomic_load(&sh->flag[0]) && now() < until) pump(0.02);
  plaitrun_rdv_set_updates(R, 2, 8, 0);
  atomic_store(&sh->flag[1], 1);
  await_joins(1, j);
  cr_expect_eq(j[0].last_epoch, 1);
  cr_assert_eq(j[0].n_lost, 3);
  cr_expect(j[0].lost[0] == 1 && j[0].lost[1] == 3 && j[0].lost[2] == 2, "lost %d %d %d",
            j[0].lost[0], j[0].lost[1], j[0].lost[2]);
  assign(j, 1, 2, (int[]){0});
  cr_expect_eq(reap(pid, 30), 0);
  plaitrun_rdv_close(R);
}

/* After a job lost a rank: asks the driver again, must be placed in epoch 2
 * with 2 ranks, reduces once as `name`, shuts down. */
static int rejoin_as_two(int w, const char *name) {
  int rank = w, size = 0;
  EXPECT_OK(plait_init());
  uint64_t epoch = 0;
  EXPECT_OK(plait_elastic_epoch(&epoch));
  EXPECT_OK(plait_rank(&rank));
  EXPECT_OK(plait_size(&size));
  if (epoch != 2 || size != 2) FAIL("epoch %llu, size %d", (unsigned long long)epoch, size);
  if (reduce_once(rank, size, name)) return 1;
  EXPECT_OK(plait_shutdown());
  return 0;
}

/* Reduces until the job fails (a worker was killed), then asks again. */
static int survive(int w, void *arg) {
  shared_t *sh = arg;
  int rank = w;
  EXPECT_OK(plait_init());
  atomic_fetch_add(&sh->count, 1);
  plait_result_t rc = PLAIT_SUCCESS;
  for (int it = 0; it < 100000 && rc == PLAIT_SUCCESS; it++) {
    float x[4] = {1, 2, 3, 4};
    rc = allreduce_wait("step", x, 4, 30);
  }
  EXPECT_ERR(rc, PLAIT_ERR_PEER_LOST, "rank 2");
  plait_shutdown(); /* after a failure: releases everything, whatever it says */
  return rejoin_as_two(w, "after");
}

Test(elastic_rdv, survivors_rejoin_naming_the_lost_rank, .timeout = 120) {
  open_driver();
  shared_t *sh = shared_new();
  pid_t pid[3];
  for (int w = 0; w < 3; w++) pid[w] = spawn(w, survive, sh, NULL);
  plaitrun_rdv_join_t j[MAX_W];
  await_joins(3, j);
  assign(j, 3, 1, (int[]){0, 1, 2});
  double until = now() + 30;
  while (atomic_load(&sh->count) < 3 && now() < until) pump(0.02);
  cr_assert_eq(atomic_load(&sh->count), 3, "the job of epoch 1 started");
  pump(0.2); /* a few steps */
  kill(pid[2], SIGKILL);
  cr_expect_eq(reap(pid[2], 10), -1);
  await_joins(2, j);
  for (int i = 0; i < 2; i++) {
    cr_expect_eq(j[i].last_epoch, 1, "%s", j[i].worker);
    cr_expect(j[i].n_lost == 1 && j[i].lost[0] == 2, "%s names %d lost rank(s), first %d",
              j[i].worker, j[i].n_lost, j[i].lost[0]);
  }
  assign(j, 2, 2, (int[]){0, 1});
  for (int w = 0; w < 2; w++) cr_expect_eq(reap(pid[w], 60), 0, "worker %d", w);
  plaitrun_rdv_close(R);
}

/* A job of 3 formed, but its rank 2 never joins (a worker stopped between
 * its place and its connection): ranks 0 and 1 both name rank 2 lost within
 * PLAIT_TIMEOUT_S, not PLAIT_START_TIMEOUT_S, and rank 1 never blames rank
 * 0; their next JOIN names rank 2, and the job of the two goes on. */
static int short_of_one(int w, void *arg) {
  (void)arg;
  int rank = w;
  setenv("PLAIT_TIMEOUT_S", "2", 1);
  setenv("PLAIT_START_TIMEOUT_S", "60", 1);
  double t0 = now();
  plait_result_t rc = plait_init();
  EXPECT_ERR(rc, PLAIT_ERR_PEER_LOST, "rank 2 was lost", "did not join rank 0",
             "PLAIT_TIMEOUT_S=2");
  if (now() - t0 > 15) FAIL("rank 2's absence was named after %.1f s", now() - t0);
  plait_shutdown();
  return rejoin_as_two(w, "two");
}

Test(elastic_rdv, a_rank_that_never_joins_is_named_within_the_timeout, .timeout = 120) {
  open_driver();
  pid_t pid[2];
  for (int w = 0; w < 2; w++) pid[w] = spawn(w, short_of_one, NULL, NULL);
  plaitrun_rdv_join_t j[MAX_W];
  await_joins(2, j);
  for (int r = 0; r < 2; r++) { /* places 0 and 1 of 3; place 2 is given to nobody */
    plaitrun_rdv_assign_t a = {1, r, 3, r, 3, 0, 1, ""};
    snprintf(a.rendezvous, sizeof a.rendezvous, "%s", j[0].rendezvous);
    cr_assert_eq(plaitrun_rdv_assign(R, j[r].worker, &a), 0);
  }
  await_joins(2, j);
  for (int i = 0; i < 2; i++)
    cr_expect(j[i].last_epoch == 1 && j[i].n_lost == 1 && j[i].lost[0] == 2,
              "%s: epoch %llu, %d lost rank(s), first %d", j[i].worker,
              (unsigned long long)j[i].last_epoch, j[i].n_lost, j[i].lost[0]);
  assign(j, 2, 2, (int[]){0, 1});
  for (int w = 0; w < 2; w++) cr_expect_eq(reap(pid[w], 60), 0, "worker %d", w);
  plaitrun_rdv_close(R);
}

static int wrong_door(int w, void *arg) {
  (void)arg;
  int rank = w;
  plait_result_t rc = plait_init();
  EXPECT_ERR(rc, PLAIT_ERR_PROTOCOL, "made worker host/0 rank 0 of epoch 1",
             "rendezvous 127.0.0.1:1,", "but it listens on 127.0.0.1:");
  return 0;
}

Test(elastic_rdv, rank_0_must_be_given_its_own_address, .timeout = 60) {
  open_driver();
  pid_t pid = spawn(0, wrong_door, NULL, NULL);
  plaitrun_rdv_join_t j[MAX_W];
  await_joins(1, j);
  plaitrun_rdv_assign_t a = {1, 0, 1, 0, 1, 0, 1, "127.0.0.1:1"};
  cr_assert_eq(plaitrun_rdv_assign(R, "host/0", &a), 0);
  cr_expect_eq(reap(pid, 30), 0);
  plaitrun_rdv_close(R);
}

static int driver_gone(int w, void *arg) {
  (void)arg;
  int rank = w;
  double t0 = now();
  plait_result_t rc = plait_init();
  EXPECT_ERR(rc, PLAIT_ERR_PEER_LOST, "elastic driver at 127.0.0.1:", "connection closed",
             "host/0");
  if (now() - t0 > 10) FAIL("it took %.1f s to notice", now() - t0);
  return 0;
}

Test(elastic_rdv, a_driver_that_closes_fails_init_promptly, .timeout = 60) {
  open_driver();
  pid_t pid = spawn(0, driver_gone, NULL, NULL);
  plaitrun_rdv_join_t j[MAX_W];
  await_joins(1, j);
  plaitrun_rdv_close(R);
  R = NULL;
  cr_expect_eq(reap(pid, 30), 0);
}

static int join_single(int w, void *arg) {
  (void)arg;
  int rank = w;
  EXPECT_OK(plait_init());
  if (reduce_once(0, 1, "solo")) return 1;
  EXPECT_OK(plait_shutdown());
  return 0;
}

static int raw_connect(void) {
  char host[64];
  int port, fd = -1, transient;
  cr_assert_eq(plait_net_parse_hostport(plaitrun_rdv_address(R), "driver", host, sizeof host,
                                        &port), PLAIT_SUCCESS);
  cr_assert_eq(plait_net_connect(host, port, now() + 5, &fd, &transient), PLAIT_SUCCESS);
  return fd;
}

Test(elastic_rdv, garbage_does_not_disturb_a_good_worker, .timeout = 60) {
  open_driver();
  capture_stderr();
  int junk = raw_connect(), silent = raw_connect(), huge = raw_connect();
  pump(0.2);
  static const char noise[] = "GET / HTTP/1.1\r\nHost: x\r\n\r\n";
  cr_assert_eq(plait_net_write_full(junk, noise, sizeof noise - 1, now() + 2), PLAIT_IO_OK);
  uint8_t hdr[PLAIT_WIRE_HEADER_SIZE] = {'P', 'L', 'T', '1', PLAIT_WIRE_VERSION, 0,
                                         PLAIT_MSG_AUTH, 0, 0, 0, 0, 1}; /* 16 MiB payload */
  cr_assert_eq(plait_net_write_full(huge, hdr, sizeof hdr, now() + 2), PLAIT_IO_OK);
  pid_t pid = spawn(0, join_single, NULL, NULL);
  plaitrun_rdv_join_t j[MAX_W];
  await_joins(1, j);
  assign(j, 1, 1, (int[]){0});
  int code = reap(pid, 30);
  pump(5.5); /* past the handshake's bound */
  char *log = release_stderr();
  cr_expect_eq(code, 0, "the good worker ran");
  char buf[256];
  for (int i = 0; i < 3; i++) {
    int fd = i == 0 ? junk : i == 1 ? silent : huge;
    ssize_t n;
    do n = read(fd, buf, sizeof buf); /* the HELLO, then the close */
    while (n > 0);
    cr_expect(n == 0 || (n < 0 && errno == ECONNRESET), "connection %d was dropped", i);
    close(fd);
  }
  cr_expect(strstr(log, "bad magic") || strstr(log, "magic"), "garbage named: %s", log);
  cr_expect(strstr(log, "over the limit"), "an oversized frame named: %s", log);
  cr_expect(strstr(log, "did not authenticate within 5 s"), "a stalled handshake named: %s", log);
  plaitrun_rdv_close(R);
}

Test(elastic_rdv, not_elastic_calls_say_so) {
  int enabled = 1, removed = 1;
  cr_assert_eq(plait_elastic_enabled(&enabled), PLAIT_SUCCESS);
  cr_expect_eq(enabled, 0);
  setenv("PLAIT_ELASTIC_DRIVER", "no-port-here", 1);
  cr_assert_eq(plait_elastic_enabled(&enabled), PLAIT_SUCCESS);
  cr_expect_eq(enabled, 0, "a malformed address is not elastic");
  cr_expect_eq(plait_init(), PLAIT_ERR_CONFIG);
  cr_expect(strstr(plait_last_error(), "PLAIT_ELASTIC_DRIVER='no-port-here'"), "%s",
            plait_last_error());
  unsetenv("PLAIT_ELASTIC_DRIVER");
  uint64_t epoch = 9, ts = 9;
  unsigned up = 9;
  cr_expect_eq(plait_elastic_epoch(&epoch), PLAIT_ERR_NOT_INITIALIZED);
  setenv("PLAIT_TRANSPORT", "gloo", 1);
  plait_test_set_plugin_path();
  cr_assert_eq(plait_init(), PLAIT_SUCCESS, "%s", plait_last_error());
  cr_assert_eq(plait_elastic_epoch(&epoch), PLAIT_SUCCESS);
  cr_expect_eq(epoch, 0);
  cr_assert_eq(plait_elastic_host_updates(&ts, &up), PLAIT_SUCCESS);
  cr_expect(ts == 0 && up == 0);
  cr_assert_eq(plait_elastic_removed(&removed), PLAIT_SUCCESS);
  cr_expect_eq(removed, 0);
  cr_expect_eq(plait_elastic_host_updates(NULL, &up), PLAIT_ERR_INVALID_ARGUMENT);
  cr_assert_eq(plait_shutdown(), PLAIT_SUCCESS);
}

/* ---- units: the messages and the MAC ---- */

static plait_writer_t W;
static void free_w(void) { plait_wr_free(&W); }
TestSuite(elastic_wire, .fini = free_w);

Test(elastic_wire, join_round_trip_every_prefix_malformed) {
  plait_el_join_t m = {"h1/3", 4, "10.0.0.1:4321", 2, {5, 7}}, b;
  cr_assert_eq(plait_el_encode_join(&W, &m), PLAIT_SUCCESS);
  size_t n = W.len - PLAIT_WIRE_HEADER_SIZE;
  cr_assert_eq(plait_msg_decode_frame(W.data, W.len), PLAIT_SUCCESS, "%s", plait_last_error());
  cr_assert_eq(plait_el_decode_join(W.data + 12, n, &b), PLAIT_SUCCESS);
  cr_expect_str_eq(b.worker, "h1/3");
  cr_expect_str_eq(b.rendezvous, "10.0.0.1:4321");
  cr_expect(b.last_epoch == 4 && b.n_lost == 2 && b.lost[0] == 5 && b.lost[1] == 7);
  for (size_t k = 0; k < n; k++) {
    cr_assert_eq(plait_el_decode_join(W.data + 12, k, &b), PLAIT_ERR_PROTOCOL, "prefix %zu", k);
    cr_assert(strstr(plait_last_error(), "malformed elastic JOIN"), "%s", plait_last_error());
  }
}

Test(elastic_wire, bad_fields_are_named) {
  plait_el_assign_t a = {3, 2, 2, 0, 1, 0, 1, "1.2.3.4:5"}, b;
  cr_assert_eq(plait_el_encode_assign(&W, &a), PLAIT_SUCCESS);
  cr_expect_eq(plait_el_decode_assign(W.data + 12, W.len - 12, &b), PLAIT_ERR_PROTOCOL);
  cr_expect(strstr(plait_last_error(), "ASSIGN: the rank is not below the size"), "%s",
            plait_last_error());
  plait_wr_free(&W);
  a.rank = 1, a.epoch = 0;
  cr_assert_eq(plait_el_encode_assign(&W, &a), PLAIT_SUCCESS);
  cr_expect_eq(plait_el_decode_assign(W.data + 12, W.len - 12, &b), PLAIT_ERR_PROTOCOL);
  cr_expect(strstr(plait_last_error(), "epoch 0"), "%s", plait_last_error());
  plait_wr_free(&W);
  plait_el_updates_t u = {1, 4};
  cr_assert_eq(plait_el_encode_updates(&W, &u), PLAIT_SUCCESS);
  cr_expect_eq(plait_el_decode_updates(W.data + 12, W.len - 12, &u), PLAIT_ERR_PROTOCOL);
  cr_expect(strstr(plait_last_error(), "unknown update bits"), "%s", plait_last_error());
  plait_wr_free(&W);
  plait_el_join_t j = {"", 0, "", 65, {0}};
  memset(j.worker, 'w', sizeof j.worker); /* no NUL: longer than its field */
  cr_expect_eq(plait_el_encode_join(&W, &j), PLAIT_ERR_INVALID_ARGUMENT,
               "a name that does not fit is refused, not cut");
}

Test(elastic_wire, auth_epoch_is_covered_and_old_frames_unchanged) {
  uint8_t s[PLAIT_WIRE_NONCE_SIZE] = {1}, c[PLAIT_WIRE_NONCE_SIZE] = {2};
  uint8_t m0[32], m1[32], m2[32], e0[32];
  cr_assert_eq(plait_auth_mac(secret, PLAIT_AUTH_CLIENT, s, c, 1, 2, m0), PLAIT_SUCCESS);
  cr_assert_eq(plait_auth_mac_epoch(secret, PLAIT_AUTH_CLIENT, s, c, 1, 2, 0, e0), PLAIT_SUCCESS);
  cr_expect_eq(memcmp(m0, e0, 32), 0, "epoch 0 is the MAC of old");
  plait_auth_mac_epoch(secret, PLAIT_AUTH_CLIENT, s, c, 1, 2, 1, m1);
  plait_auth_mac_epoch(secret, PLAIT_AUTH_CLIENT, s, c, 1, 2, 2, m2);
  cr_expect_neq(memcmp(m1, m2, 32), 0);
  cr_expect_eq(plait_auth_verify_epoch(secret, PLAIT_AUTH_CLIENT, s, c, 1, 2, 1, m2), 0);
  cr_expect_eq(plait_auth_verify_epoch(secret, PLAIT_AUTH_CLIENT, s, c, 1, 2, 2, m2), 1);
  for (int role = 0; role < 4; role++) /* each role's label: no MAC of one passes as another */
    cr_expect_eq(plait_auth_verify_epoch(secret, (plait_auth_role_t)role, s, c, 1, 2, 2, m2),
                 role == PLAIT_AUTH_CLIENT, "role %d", role);
  plait_msg_auth_t a, b;
  memset(&a, 0, sizeof a);
  strcpy(a.host, "n");
  cr_assert_eq(plait_msg_encode_auth(&W, &a), PLAIT_SUCCESS);
  size_t old_len = W.len;
  cr_expect_eq(old_len, 12 + 8 + 64 + 4 + 1 + 8, "the frame of old, without an epoch");
  plait_wr_free(&W);
  a.epoch = 0x100000002ull;
  cr_assert_eq(plait_msg_encode_auth(&W, &a), PLAIT_SUCCESS);
  cr_expect_eq(W.len, old_len + 8);
  cr_assert_eq(plait_msg_decode_auth(W.data + 12, W.len - 12, &b), PLAIT_SUCCESS);
  cr_expect_eq(b.epoch, 0x100000002ull);
}
