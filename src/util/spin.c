/* Polling a little before sleeping (spin.h). */
#include "util/spin.h"

#include <sched.h>

#include "util/clock.h"
#include "util/log.h"

/* A yield that takes longer than this ran another thread for a slice of its
 * own: on this CPU polling loses to sleeping. */
#define LATE_YIELD_S 200e-6
/* How long polling stays off after a late yield. */
#define OFF_S 1.0

void plait_spin_init(plait_spin_t *s, int64_t spin_us) {
  s->spin_s = spin_us > 0 ? (double)spin_us * 1e-6 : 0;
  s->off_until = 0;
  s->held = 0;
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
    if (after - before > LATE_YIELD_S) {
      s->off_until = after + OFF_S;
      s->held++;
      PLAIT_DEBUG("coordinator", "a yield came back after %.0f us (another thread held the "
                  "CPU): sleeping instead of polling for %g s", (after - before) * 1e6, OFF_S);
      return plait_waitset_poll(ws, pfd, n, 0);
    }
  }
}
