/* Which engine the calling thread works for (declared in engine.h): the
 * coordinator's thread binds itself here, and api/current.c reads it. Its
 * own file, in a wing, so that coordinator.c calls it downward, not back
 * into engine.c, which starts the coordinator. */
#include "engine/engine.h"

static _Thread_local plait_engine_t *bound;

void plait_engine_bind_thread(plait_engine_t *e) { bound = e; }
plait_engine_t *plait_engine_bound(void) { return bound; }
