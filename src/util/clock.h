/* Internal: the one clock of the core. */
#ifndef PLAIT_CLOCK_H
#define PLAIT_CLOCK_H

/* Monotonic seconds (CLOCK_MONOTONIC): for deadlines and durations, never
 * for the time of day. Any thread. */
double plait_now(void);

#endif
