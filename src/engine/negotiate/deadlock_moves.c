/* Who moved when, for rank 0's deadlock detection (deadlock.h): the
 * per-rank marks the negotiator sets as announcements arrive and records
 * become ready or fail, read by plait_deadlock_inspect (deadlock.c). Its own
 * file so that records.c marks moves downward, not back into deadlock.c,
 * which fails records through records.c. */
#include "engine/negotiate/deadlock.h"

#include <stdlib.h>
#include <string.h>

int plait_deadlock_init(plait_deadlock_t *d, int size) {
  memset(d, 0, sizeof *d);
  d->size = size;
  d->moved = calloc((size_t)(size > 0 ? size : 1), sizeof *d->moved);
  d->dirty = calloc((size_t)(size > 0 ? size : 1), 1);
  if (d->moved && d->dirty) return 0;
  plait_deadlock_free(d);
  return -1;
}

void plait_deadlock_free(plait_deadlock_t *d) {
  free(d->moved);
  free(d->dirty);
  memset(d, 0, sizeof *d);
}

void plait_deadlock_moved(plait_deadlock_t *d, int rank) {
  if (!d->dirty || rank < 0 || rank >= d->size) return;
  d->dirty[rank] = 1;
  d->any_dirty = 1;
}

void plait_deadlock_moved_range(plait_deadlock_t *d, int lo, int hi) {
  if (!d->dirty || lo < 0 || hi >= d->size || lo > hi) return;
  memset(d->dirty + lo, 1, (size_t)(hi - lo + 1));
  d->any_dirty = 1;
}

void plait_deadlock_moved_set(plait_deadlock_t *d, const uint8_t *member) {
  if (!d->dirty) return;
  if (!member) memset(d->dirty, 1, (size_t)d->size);
  for (int r = 0; member && r < d->size; r++) d->dirty[r] |= member[r] != 0;
  d->any_dirty = 1;
}
