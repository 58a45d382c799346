/* Silence on the control plane: heartbeats due and ranks lost (silence.h). */
#include "engine/health/silence.h"

#include <stdlib.h>

#include "util/error.h"

plait_result_t plait_silence_init(plait_silence_t *s, int rank, int size, double timeout_s) {
  s->rank = rank;
  s->size = size;
  s->timeout_s = timeout_s;
  if (!(s->last_heard = calloc((size_t)size, sizeof *s->last_heard)))
    return plait_error(PLAIT_ERR_NO_MEMORY, "out of memory starting the coordinator");
  for (int r = 0; r < size; r++) s->last_heard[r] = plait_now();
  s->last_sent = s->last_check = plait_now();
  return PLAIT_SUCCESS;
}

void plait_silence_free(plait_silence_t *s) {
  free(s->last_heard);
  s->last_heard = NULL;
}

void plait_silence_all_busy(plait_silence_t *s) {
  double now = plait_now(); /* once: not two clock reads per rank */
  for (int r = 1; r < s->size; r++)
    if (s->last_heard[r] < now) s->last_heard[r] = now;
}

void plait_silence_heard_subtree(plait_silence_t *s, int root, int k, double t) {
  for (long lo = root, hi = root; lo < s->size; lo = lo * k + 1, hi = hi * k + k) {
    for (long r = lo; r <= hi && r < s->size; r++) s->last_heard[r] = t;
    if (!k) break;
  }
}

int plait_silence_beat_due(const plait_silence_t *s) {
  return s->size > 1 && plait_now() - s->last_sent >= s->timeout_s / 4;
}

plait_result_t plait_silence_check(plait_silence_t *s) {
  double now = plait_now(), unwatched = now - s->last_check - s->timeout_s / 4;
  s->last_check = now;
  for (int r = 0; unwatched > 0 && r < s->size; r++) /* silence.h */
    s->last_heard[r] = s->last_heard[r] + unwatched < now ? s->last_heard[r] + unwatched : now;
  if (s->rank == 0) {
    for (int r = 1; r < s->size; r++)
      if (now - s->last_heard[r] > s->timeout_s)
        return plait_error(PLAIT_ERR_PEER_LOST, "rank %d was lost: silent for %.1f s "
                           "(PLAIT_TIMEOUT_S=%g)", r, now - s->last_heard[r], s->timeout_s);
  } else if (s->size > 1 && now - s->last_heard[0] > s->timeout_s) {
    return plait_error(PLAIT_ERR_PEER_LOST, "rank 0 was lost: silent for %.1f s "
                       "(PLAIT_TIMEOUT_S=%g)", now - s->last_heard[0], s->timeout_s);
  }
  return PLAIT_SUCCESS;
}
