/* Polling a little before sleeping (spin.h). */
#include "util/spin.h"

#include <sched.h>

#include "util/clock.h"
#include "util/log.h"

/* A yield that takes longer than this ran another thread for a slice of its
 * own: on this CPU polling loses to sleeping. */
#define LATE_YIELD_S 200e-6
/* How long polling stays off after a late yield: OFF_MIN_S after a calm
 * spell (no late yield for CALM times the last pause since it ended), twice
 * the last pause otherwise, at most OFF_MAX_S. */
#define OFF_MIN_S 0.01
#define OFF_MAX_S 1.0
#define CALM 4
/* A collective this long or longer excuses the late yields that follow it
 * for as long again, at most EXCUSE_MAX_S. */
#define LONG_RUN_S 2e-3
#define EXCUSE_MAX_S 0.1

void plait_spin_init(plait_spin_t *s, int64_t spin_us) {
  s->spin_s = spin_us > 0 ? (double)spin_us * 1e-6 : 0;
  s->off_until = 0;
  s->off_s = 0;
  s->held = 0;
  s->excused_until = 0;
  s->excused = 0;
}

void plait_spin_ran(plait_spin_t *s, double took_s, double now) {
  if (took_s < LONG_RUN_S) return;
  double until = now + (took_s < EXCUSE_MAX_S ? took_s : EXCUSE_MAX_S);
  if (until > s->excused_until) s->excused_until = until;
}

void plait_spin_late(plait_spin_t *s, double now) {
  int calm = s->off_s == 0 || now - s->off_until > CALM * s->off_s;
  double off = calm ? OFF_MIN_S : 2 * s->off_s;
  s->off_s = off > OFF_MAX_S ? OFF_MAX_S : off;
  s->off_until = now + s->off_s;
  s->held++;
}

int plait_spin_poll(plait_spin_t *s, plait_waitset_t *ws, struct pollfd *pfd, int n,
                    double until) {
  if (s->spin_s <= 0) return 0;
  double now = plait_now();
  if (now < s->off_until || now >= until) return 0;
  for (;;) {
    int ready = plait_waitset_poll(ws, pfd, n, 0);
    if (ready != 0) return ready;
    double before = plait_now();
    if (before >= until) return 0;
    sched_yield();
    double after = plait_now();
    if (after - before > LATE_YIELD_S && after < s->excused_until) {
      s->excused++; /* another rank finishing a long collective: this poll ends */
      return plait_waitset_poll(ws, pfd, n, 0);
    }
    if (after - before > LATE_YIELD_S) {
      plait_spin_late(s, after);
      PLAIT_DEBUG("coordinator", "a yield came back after %.0f us (another thread held the "
                  "CPU): sleeping instead of polling for %g ms", (after - before) * 1e6,
                  s->off_s * 1e3);
      return plait_waitset_poll(ws, pfd, n, 0);
    }
  }
}
