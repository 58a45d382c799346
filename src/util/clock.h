/* Internal: the one clock of the core. */
#ifndef PLAIT_CLOCK_H
#define PLAIT_CLOCK_H

#include <pthread.h>
#include <time.h>

/* Monotonic seconds (CLOCK_MONOTONIC): for deadlines and durations, never
 * for the time of day. Any thread. */
double plait_now(void);

/* CPU seconds the calling thread has used (CLOCK_THREAD_CPUTIME_ID): what
 * the thread itself did, not the time it waited or was descheduled. */
double plait_thread_cpu_s(void);

/* pthread_cond_timedwait on a condition variable made with
 * pthread_condattr_setclock(CLOCK_MONOTONIC), `until` on that clock, `mu`
 * held. Returns ETIMEDOUT only once CLOCK_MONOTONIC has reached `until`: an
 * early ETIMEDOUT (seen under libfaketime, whose wrapper reads a monotonic
 * deadline as a wall-clock one: tests/tools/hosts/matrix.sh walljump) reads
 * as a wakeup, 0, and the caller's loop checks its condition again. Any
 * thread. */
int plait_cond_wait_until(pthread_cond_t *cv, pthread_mutex_t *mu, const struct timespec *until);

#endif
