/* Internal: polling a little before sleeping.
 *
 * A thread that sleeps in poll() and is woken by a socket or an eventfd pays
 * the wake-up: tens of microseconds on a virtual machine whose CPU went idle
 * (measured: a lone 4 KiB allreduce between 2 ranks spent about 90 us of its
 * 110-150 us in three such wake-ups). Right after it did work, the
 * coordinator instead keeps polling without waiting for a short while
 * (PLAIT_SPIN_US), yielding the CPU between polls, because the next thing
 * it waits for (a peer's answer, the caller's next submission) usually
 * comes within that time.
 *
 * Polling must never cost more than the sleep it saves. A yield that does
 * not come back for long means another runnable thread held this CPU for a
 * scheduler slice (another program, or more threads than CPUs); a thread
 * that polls is not woken early the way a sleeping one is, so it would have
 * waited out that slice (milliseconds) for an answer that had come. After
 * such a yield, polling stops for a while and the thread sleeps as usual:
 * 10 ms after a lone late yield, twice as long after each late yield that
 * follows the last pause within four times its length (up to a second),
 * 10 ms again after a calm spell. A brief burst of other work (a large
 * collective, another rank's turn on an oversubscribed host) thus costs a
 * few milliseconds of sleeping, while a CPU-bound neighbour that turns every
 * yield into a slice costs one slice a second, as a fixed second did.
 *
 * Except right after a long collective (2 ms or more): for as long again
 * (at most 0.1 s), a late yield only ends that poll, it starts no pause.
 * Such a yield was most likely another rank of this job still finishing
 * its part on this CPU (3 ranks on 2 CPUs: 64 MiB allreduces built the
 * pause up to a second, and the lone operations that followed then ran
 * without polling: 68-156 us each from PyTorch, 41-52 us since); it says
 * nothing about the CPU once they are done. A CPU-bound neighbour still
 * pauses polling through every stretch of short operations.
 *
 * One thread per spin state. */
#ifndef PLAIT_UTIL_SPIN_H
#define PLAIT_UTIL_SPIN_H

#include <poll.h>
#include <stdint.h>

#include "util/waitset.h"

typedef struct plait_spin {
  double spin_s;     /* PLAIT_SPIN_US in seconds; 0: never poll before sleeping */
  double off_until;  /* polling is off until this time (plait_now) */
  double off_s;      /* the length of the last pause (0: none yet) */
  uint64_t held;     /* times a yield came back late and polling stopped */
  double excused_until; /* late yields before this start no pause (plait_spin_ran) */
  uint64_t excused;     /* late yields excused so */
} plait_spin_t;

/* Polling for at most spin_us microseconds at a time (0: never). */
void plait_spin_init(plait_spin_t *s, int64_t spin_us);

/* Polls pfd[0..n) without waiting (plait_waitset_poll with timeout 0),
 * yielding the CPU between polls, until a descriptor is ready or the clock
 * (plait_now) reaches `until`. Returns what the last poll returned: > 0
 * ready, 0 nothing by `until` (or polling is off: nothing was polled), -1
 * with errno. Never blocks for longer than a yield; the caller then waits
 * as usual when it returns 0. */
int plait_spin_poll(plait_spin_t *s, plait_waitset_t *ws, struct pollfd *pfd, int n,
                    double until);

/* Records a yield that came back late at now (plait_now): polling pauses
 * until s->off_until, for s->off_s, the length the rule above gives. */
void plait_spin_late(plait_spin_t *s, double now);

/* The thread ran collectives for took_s seconds, until now: after a long
 * one, late yields start no pause for a while (see above). */
void plait_spin_ran(plait_spin_t *s, double took_s, double now);

#endif
