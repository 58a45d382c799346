/*
 * The cached epoch (PLAIT_CACHED_EPOCH, src/engine/negotiate/epoch.h) on
 * forked ranks over gloo, against the same jobs with it off:
 *  - a lone cached allreduce and a burst of three, step after step: exact
 *    results, and the peers send almost no control messages (with it off,
 *    one or more per step);
 *  - a mismatch in the epoch (one rank submits the cached name with another
 *    shape): every rank gets the error, word for word what it is with the
 *    epoch off, and the job goes on;
 *  - another name on one rank while the other submits the burst: both run,
 *    in the order rank 0 gives;
 *  - a rank that computes for longer than PLAIT_TIMEOUT_S before its next
 *    submission: nobody fails (a ready rank waits in the AND only briefly);
 *  - a rank killed in the epoch: the others fail with PEER_LOST naming it;
 *  - a join in the epoch: the joined rank contributes zeros, as without;
 *  - a setting changed in the epoch (fusion off by plait_config_set): the
 *    epoch closes and the burst runs unfused from then on;
 *  - a process set's work on two of three ranks in the epoch: the epoch
 *    closes, the set's allreduce and the global ones are right;
 *  - an AND slower than PLAIT_TIMEOUT_S (the "flaky" fixture sleeps in
 *    every allreduce): nobody is named lost, as for a slow collective.
 */
#include <criterion/criterion.h>

#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>

#include "ops_util.h"

#define STEPS 300
#define COUNT 1024

typedef struct {
  char msg[4][1024]; /* per rank: the error of the mismatched step */
} shared_t;

static shared_t *SH;

static void share(void) {
  if (!SH) SH = mmap(NULL, sizeof *SH, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  cr_assert(SH != MAP_FAILED);
  memset(SH, 0, sizeof *SH);
}

/* One allreduce of name (count floats, value rank + step) checked exactly;
 * rc its result. */
static int one(int rank, int nranks, const char *name, size_t count, int step,
               plait_result_t *rc) {
  static float x[COUNT + 8];
  for (size_t i = 0; i < count; i++) x[i] = (float)(rank + step + (int)(i % 7));
  plait_tensor_t t;
  plait_handle_t *h;
  OK(plait_tensor_1d(&t, x, count, PLAIT_FLOAT32));
  OK(plait_allreduce_async(name, &t, &t, PLAIT_OP_SUM, NULL, &h));
  *rc = plait_wait(h, 60);
  plait_release(h);
  if (*rc) return 0;
  for (size_t i = 0; i < count; i++) {
    float want = (float)(nranks * (nranks - 1) / 2 + nranks * (step + (int)(i % 7)));
    CHECK(x[i] == want, "%s step %d [%zu]: %g, want %g", name, step, i, x[i], want);
  }
  return 0;
}

static int lone(int rank, int nranks, const char *name, int step) {
  plait_result_t rc;
  if (one(rank, nranks, name, COUNT, step, &rc)) return 1;
  CHECK(rc == PLAIT_SUCCESS, "%s step %d: %s: %s", name, step, plait_result_name(rc),
        plait_last_error());
  return 0;
}

/* 20 steps of name, then 20 more in which a peer with the epoch on must
 * send next to no control message (the epoch is open). */
static int warm(int rank, int nranks, const char *name) {
  plait_stats_t s0, s1;
  for (int i = 0; i < 20; i++)
    if (lone(rank, nranks, name, i)) return 1;
  OK(ops_stats(&s0));
  for (int i = 0; i < 20; i++)
    if (lone(rank, nranks, name, i)) return 1;
  OK(ops_stats(&s1));
  const char *on = getenv("PLAIT_CACHED_EPOCH");
  if (rank > 0 && on && strcmp(on, "1") == 0)
    CHECK(s1.control_messages - s0.control_messages < 10, "%s: the epoch did not open (%llu "
          "control messages in 20 steps)", name,
          (unsigned long long)(s1.control_messages - s0.control_messages));
  return 0;
}

/* Three allreduces submitted together, then waited for. */
static int burst(int rank, int nranks, int step) {
  float x[3][64];
  plait_handle_t *h[3];
  for (int k = 0; k < 3; k++) {
    char name[16];
    snprintf(name, sizeof name, "b%d", k);
    for (int i = 0; i < 64; i++) x[k][i] = (float)(rank * 3 + k + step);
    plait_tensor_t t;
    OK(plait_tensor_1d(&t, x[k], 64, PLAIT_FLOAT32));
    OK(plait_allreduce_async(name, &t, &t, PLAIT_OP_SUM, NULL, &h[k]));
  }
  for (int k = 0; k < 3; k++) {
    OK(plait_wait(h[k], 60));
    plait_release(h[k]);
    float want = (float)(3 * nranks * (nranks - 1) / 2 + nranks * (k + step));
    CHECK(x[k][0] == want && x[k][63] == want, "b%d step %d: %g, want %g", k, step, x[k][0],
          want);
  }
  return 0;
}

static int steady(int rank, int nranks, void *arg) {
  int epoch = *(int *)arg;
  plait_stats_t s0, s1;
  for (int i = 0; i < 5; i++)
    if (lone(rank, nranks, "g", i)) return 1;
  OK(ops_stats(&s0));
  for (int i = 0; i < STEPS; i++)
    if (lone(rank, nranks, "g", i)) return 1;
  OK(ops_stats(&s1));
  uint64_t sent = s1.control_messages - s0.control_messages;
  plait_test_say(rank, "epoch %d: %llu control messages for %d lone allreduces", epoch,
                 (unsigned long long)sent, STEPS);
  /* off: one REQUESTS frame a step; on: one only for a step that closed the
   * epoch (a rank descheduled past PLAIT_EPOCH_WAIT_S on a loaded machine) */
  if (rank > 0 && epoch)
    CHECK(sent < STEPS / 2, "epoch on: %llu control messages for %d steps",
          (unsigned long long)sent, STEPS);
  if (rank > 0 && !epoch) CHECK(sent >= STEPS, "epoch off: only %llu", (unsigned long long)sent);
  for (int i = 0; i < 100; i++)
    if (burst(rank, nranks, i)) return 1;
  for (int i = 0; i < 20; i++) /* back to the lone one: the epoch changes burst */
    if (lone(rank, nranks, "g", i)) return 1;
  return 0;
}

static const char *ENV_ON[] = {"PLAIT_CACHED_EPOCH=1", NULL};
static const char *ENV_OFF[] = {"PLAIT_CACHED_EPOCH=0", NULL};

static void run(int nranks, int epoch, ops_body_fn body, double timeout_s, const char **extra) {
  const char *env[8];
  int k = 0;
  env[k++] = epoch ? ENV_ON[0] : ENV_OFF[0];
  for (; extra && *extra; extra++) env[k++] = *extra;
  env[k] = NULL;
  int arg = epoch;
  cr_assert_eq(ops_run(nranks, env, timeout_s, body, &arg), 0,
               "%d ranks, epoch %s: a rank failed (see above)", nranks, epoch ? "on" : "off");
}

Test(epoch_ranks, steady_2, .timeout = 300) {
  OPS_REQUIRE_GLOO();
  run(2, 1, steady, 240, NULL);
  run(2, 0, steady, 240, NULL);
}

Test(epoch_ranks, steady_3, .timeout = 300) {
  OPS_REQUIRE_GLOO();
  run(3, 1, steady, 240, NULL);
}

/* Rank 1 submits the cached name with another count once. */
static int mismatch(int rank, int nranks, void *arg) {
  (void)arg;
  if (warm(rank, nranks, "m")) return 1;
  plait_result_t rc;
  if (one(rank, nranks, "m", rank == 1 ? COUNT + 4 : COUNT, 0, &rc)) return 1;
  CHECK(rc == PLAIT_ERR_MISMATCH, "the mismatched step: %s: %s", plait_result_name(rc),
        plait_last_error());
  snprintf(SH->msg[rank], sizeof SH->msg[rank], "%s", plait_last_error());
  for (int i = 0; i < 20; i++) /* nothing lost: the job goes on */
    if (lone(rank, nranks, "m", i)) return 1;
  return 0;
}

Test(epoch_ranks, mismatch_word_for_word, .timeout = 300) {
  OPS_REQUIRE_GLOO();
  share();
  run(2, 0, mismatch, 120, NULL);
  char off[2][1024];
  memcpy(off, SH->msg, sizeof off);
  cr_assert(off[0][0] && off[1][0]);
  run(2, 1, mismatch, 120, NULL);
  for (int r = 0; r < 2; r++)
    cr_assert_str_eq(SH->msg[r], off[r], "rank %d: epoch on \"%s\", off \"%s\"", r, SH->msg[r],
                     off[r]);
}

/* Rank 1 submits a new name before the cached one, rank 0 after it. */
static int other_name(int rank, int nranks, void *arg) {
  (void)arg;
  if (warm(rank, nranks, "o")) return 1;
  float a[4] = {1, 1, 1, 1}, b[COUNT];
  for (int i = 0; i < COUNT; i++) b[i] = 1;
  plait_tensor_t ta, tb;
  plait_handle_t *ha, *hb;
  OK(plait_tensor_1d(&ta, a, 4, PLAIT_FLOAT32));
  OK(plait_tensor_1d(&tb, b, COUNT, PLAIT_FLOAT32));
  if (rank == 1) OK(plait_allreduce_async("new", &ta, &ta, PLAIT_OP_SUM, NULL, &ha));
  OK(plait_allreduce_async("o", &tb, &tb, PLAIT_OP_SUM, NULL, &hb));
  if (rank != 1) OK(plait_allreduce_async("new", &ta, &ta, PLAIT_OP_SUM, NULL, &ha));
  OK(plait_wait(ha, 60));
  OK(plait_wait(hb, 60));
  plait_release(ha);
  plait_release(hb);
  CHECK(a[0] == nranks && b[COUNT - 1] == nranks, "%g %g", a[0], b[COUNT - 1]);
  for (int i = 0; i < 20; i++)
    if (lone(rank, nranks, "o", i)) return 1;
  return 0;
}

Test(epoch_ranks, another_name, .timeout = 300) {
  OPS_REQUIRE_GLOO();
  run(2, 1, other_name, 120, NULL);
  run(3, 1, other_name, 120, NULL);
}

/* Rank 1 computes for longer than PLAIT_TIMEOUT_S between two steps. */
static int computing(int rank, int nranks, void *arg) {
  (void)arg;
  if (warm(rank, nranks, "c")) return 1;
  if (rank == 1) ops_sleep(7);
  for (int i = 0; i < 20; i++)
    if (lone(rank, nranks, "c", i)) return 1;
  return 0;
}

Test(epoch_ranks, a_rank_computing, .timeout = 300) {
  OPS_REQUIRE_GLOO();
  const char *t[] = {"PLAIT_TIMEOUT_S=3", NULL};
  run(2, 1, computing, 120, t);
}

/* Rank 2 is killed with -9 in the epoch; the others must name it. */
static int killed(int rank, int nranks, void *arg) {
  (void)arg;
  if (warm(rank, nranks, "k")) return 1;
  if (rank == 2) raise(SIGKILL);
  static float x[COUNT];
  plait_result_t rc = ops_allreduce_after_loss(rank, "k", x, COUNT);
  CHECK(rc == PLAIT_ERR_PEER_LOST, "%s, not PEER_LOST", plait_result_name(rc));
  CHECK(strstr(plait_last_error(), "rank 2") != NULL, "the error does not name rank 2");
  CHECK(strstr(plait_last_error(), "said: )") == NULL, "the transport's message was lost");
  return 0;
}

/* plait_init, the body, plait_shutdown (which reports the lost rank too). */
static int killed_main(int rank, int nranks, void *arg) {
  (void)arg;
  OK(plait_init());
  int fails = killed(rank, nranks, NULL);
  plait_shutdown();
  return fails;
}

static void run_killed(const char *epoch) {
  const char *all[] = {"PLAIT_TIMEOUT_S=5", epoch, NULL};
  plait_test_job_t job = {.nranks = 3, .timeout_s = 120, .env = all};
  plait_test_run_ranks(&job, killed_main, NULL);
  cr_assert_eq(job.exit_code[2], -1, "rank 2 was to be killed");
  for (int r = 0; r < 2; r++)
    cr_assert_eq(job.exit_code[r], 0, "%s: rank %d did not see rank 2 lost (see above)", epoch, r);
}

Test(epoch_ranks, a_rank_killed, .timeout = 300) {
  OPS_REQUIRE_GLOO();
  run_killed("PLAIT_CACHED_EPOCH=1");
  run_killed("PLAIT_CACHED_EPOCH=0");
}

/* Rank 1 joins in the epoch while rank 0 goes on. */
static int joins(int rank, int nranks, void *arg) {
  (void)arg;
  if (warm(rank, nranks, "j")) return 1;
  plait_handle_t *h;
  if (rank == 1) {
    OK(plait_join_async(NULL, &h));
    OK(plait_wait(h, 60));
    plait_release(h);
    return 0;
  }
  static float x[COUNT];
  for (int i = 0; i < 10; i++) {
    for (int k = 0; k < COUNT; k++) x[k] = 2;
    plait_tensor_t t;
    OK(plait_tensor_1d(&t, x, COUNT, PLAIT_FLOAT32));
    OK(plait_allreduce_async("j", &t, &t, PLAIT_OP_SUM, NULL, &h));
    OK(plait_wait(h, 60));
    plait_release(h);
    CHECK(x[0] == 2 && x[COUNT - 1] == 2, "%g: the joined rank added something", x[0]);
  }
  OK(plait_join_async(NULL, &h));
  OK(plait_wait(h, 60));
  plait_release(h);
  return 0;
}

Test(epoch_ranks, a_rank_joins, .timeout = 300) {
  OPS_REQUIRE_GLOO();
  run(2, 1, joins, 120, NULL);
}

/* Three steps: the first opens the epoch, the next two agree through an
 * AND that, like every allreduce of the fixture, takes 1.5 s. */
static int slow_and(int rank, int nranks, void *arg) {
  (void)arg;
  for (int i = 0; i < 3; i++)
    if (lone(rank, nranks, "s", i)) return 1;
  return 0;
}

Test(epoch_ranks, an_and_slower_than_the_timeout, .timeout = 300) {
  OPS_REQUIRE_GLOO();
  const char *env[] = {"PLAIT_TIMEOUT_S=1", "PLAIT_TRANSPORT=flaky",
                       "FLAKY_INNER=" PLAIT_TEST_LIB_DIR "/libplait-transport-gloo.so",
                       "FLAKY_RANK=-1", "FLAKY_SLOW_S=1.5", NULL};
  run(2, 1, slow_and, 120, env);
}

/* Bursts of three fuse; then every rank turns fusion off (a run-time
 * setting): the bursts after it run as three collectives each. */
static int setting(int rank, int nranks, void *arg) {
  (void)arg;
  for (int i = 0; i < 20; i++)
    if (burst(rank, nranks, i)) return 1;
  OK(plait_config_set("PLAIT_FUSION_THRESHOLD", "0"));
  for (int i = 0; i < 3; i++) /* the change closes the epoch: a step, maybe two */
    if (burst(rank, nranks, i)) return 1;
  plait_stats_t s0, s1;
  OK(ops_stats(&s0));
  for (int i = 0; i < 10; i++)
    if (burst(rank, nranks, i)) return 1;
  OK(ops_stats(&s1));
  CHECK(s1.fused_responses == s0.fused_responses, "%llu fused responses after fusion was turned "
        "off", (unsigned long long)(s1.fused_responses - s0.fused_responses));
  CHECK(s1.responses - s0.responses == 30, "%llu collectives for 10 bursts of 3 unfused",
        (unsigned long long)(s1.responses - s0.responses));
  return 0;
}

Test(epoch_ranks, a_setting_changed, .timeout = 300) {
  OPS_REQUIRE_GLOO();
  run(2, 1, setting, 120, NULL);
}

/* Ranks 1 and 2 run their set's allreduce while the epoch is open; rank 0
 * waits for them, then everyone goes on. */
static int set_work(int rank, int nranks, void *arg) {
  (void)arg;
  if (warm(rank, nranks, "p")) return 1;
  if (rank > 0) {
    float x[8] = {1, 1, 1, 1, 1, 1, 1, 1};
    plait_tensor_t t;
    plait_handle_t *h;
    plait_op_options_t o = PLAIT_OP_OPTIONS_INIT;
    o.process_set = 1;
    OK(plait_tensor_1d(&t, x, 8, PLAIT_FLOAT32));
    OK(plait_allreduce_async("p", &t, &t, PLAIT_OP_SUM, &o, &h)); /* the cached name, too */
    OK(plait_wait(h, 60));
    plait_release(h);
    CHECK(x[0] == 2 && x[7] == 2, "the set's allreduce gave %g", x[0]);
  }
  for (int i = 0; i < 20; i++)
    if (lone(rank, nranks, "p", i)) return 1;
  return 0;
}

Test(epoch_ranks, a_process_set_in_the_epoch, .timeout = 300) {
  OPS_REQUIRE_GLOO();
  const char *env[] = {"PLAIT_PROCESS_SETS=1,2", NULL};
  run(3, 1, set_work, 120, env);
}
