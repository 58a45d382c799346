/*
 * Gradients submitted one at a time, with gaps (as a framework's backward
 * pass does): a rank > 0 announces the cached allreduces of a burst that
 * ran together before in one frame, not one per submission (announce.h),
 * without waking for each submission meanwhile (plait_table_await), and a burst that does not come whole still runs, once the hold is over.
 * The results are checked every step.
 */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <time.h>

#include "ops_util.h"

#define TN 40     /* tensors per step */
#define TLEN 256  /* floats each */
#define GAP_US 300
#define TRICKLED 4 /* steps measured */

typedef struct {
  float *buf[TN];
  plait_tensor_t t[TN];
  plait_handle_t *h[TN];
  char name[TN][24];
} step_t;

static void pause_us(long us) {
  struct timespec ts = {0, us * 1000};
  nanosleep(&ts, NULL);
}

/* Submits the first m of the step's tensors (a gap after each when gap),
 * waits for them and checks their sums. */
static int step(int rank, int n, step_t *s, int m, int gap, int round) {
  for (int i = 0; i < m; i++) {
    for (int j = 0; j < TLEN; j++) s->buf[i][j] = (float)(rank + i + j + round);
    OK(plait_allreduce_async(s->name[i], &s->t[i], &s->t[i], PLAIT_OP_SUM, NULL, &s->h[i]));
    if (gap) pause_us(GAP_US);
  }
  for (int i = 0; i < m; i++) {
    OK(plait_wait(s->h[i], 60));
    OK(plait_release(s->h[i]));
    for (int j = 0; j < TLEN; j++) {
      float want = (float)(n * (i + j + round) + n * (n - 1) / 2);
      CHECK(s->buf[i][j] == want, "round %d, %s[%d] is %g, expected %g", round, s->name[i], j,
            s->buf[i][j], want);
    }
  }
  return 0;
}

static int trickle_body(int rank, int n, void *arg) {
  (void)arg;
  step_t s;
  for (int i = 0; i < TN; i++) {
    s.buf[i] = malloc(TLEN * sizeof(float));
    if (!s.buf[i]) FAILF("out of memory");
    OK(plait_tensor_1d(&s.t[i], s.buf[i], TLEN, PLAIT_FLOAT32));
    snprintf(s.name[i], sizeof s.name[i], "grad.%d", i);
  }
  int round = 0;
  for (int k = 0; k < 3; k++) /* all at once: they run together, and are cached */
    if (step(rank, n, &s, TN, 0, round++)) return 1;
  OK(plait_stats_reset());
  for (int k = 0; k < TRICKLED; k++)
    if (step(rank, n, &s, TN, 1, round++)) return 1;
  plait_stats_t st;
  OK(ops_stats(&st));
  /* one frame per submission would be TN a step; a burst that ran in a few
   * response lists at first goes in that many frames; heartbeats add one now and then */
  if (rank > 0) {
    CHECK(st.control_messages <= TRICKLED * TN / 4, "rank %d sent %llu control messages for %d "
          "steps of %d tensors submitted %d us apart (over %d a step)", rank,
          (unsigned long long)st.control_messages, TRICKLED, TN, GAP_US, TN / 4);
    /* nor is it woken by each submission while it holds (plait_table_await) */
    CHECK(st.cycles <= TRICKLED * TN / 4, "rank %d woke %llu times for %d steps of %d tensors "
          "submitted %d us apart (over %d a step)", rank, (unsigned long long)st.cycles,
          TRICKLED, TN, GAP_US, TN / 4);
  }
  /* half of the burst never comes: what came still runs, once the hold is over */
  if (step(rank, n, &s, TN / 2, 1, round++)) return 1;
  if (step(rank, n, &s, TN, 1, round++)) return 1; /* and the whole of it again */
  for (int i = 0; i < TN; i++) free(s.buf[i]);
  return 0;
}

static void run(int nranks) {
  /* a hold far longer than a step's gaps, even on a loaded machine */
  const char *env[] = {"PLAIT_CYCLE_TIME_MS=500", NULL};
  cr_assert_eq(ops_run(nranks, env, 120, trickle_body, NULL), 0,
               "%d ranks, submissions trickling in: a rank failed (see above)", nranks);
}

Test(trickle, bursts_go_in_one_frame_2ranks, .timeout = 150) { run(2); }
Test(trickle, bursts_go_in_one_frame_3ranks, .timeout = 150) { run(3); }
