/* Internal: this rank's counters behind plait_stats(). */
#ifndef PLAIT_STATS_H
#define PLAIT_STATS_H

#include "plait/plait.h"

/* Locks the counters and returns them; every update is bracketed by
 * plait_stats_lock / plait_stats_unlock. */
plait_stats_t *plait_stats_lock(void);
void plait_stats_unlock(void);
/* Zeroes them (at init). */
void plait_stats_clear(void);

#endif
