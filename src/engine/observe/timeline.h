/*
 * Internal: the Chrome-trace timeline (chrome://tracing, Perfetto).
 *
 * One row per tensor (a "thread" named after the tensor), activities as
 * begin/end pairs (PLAIT_TL_ACTIVITIES below, and <TRANSPORT>_<OP> such as
 * GLOO_ALLREDUCE); optional instant markers for coordinator cycles
 * (CYCLE). Events are queued and written by the
 * timeline's own thread, so emitting never waits for the disk. The file is a
 * JSON array that is complete and valid after every write.
 *
 * Every plait_tl_* function is a cheap no-op while no timeline is active (or
 * when tl is NULL), may be called from any thread, and never blocks on I/O.
 * Strings are copied.
 */
#ifndef PLAIT_TIMELINE_H
#define PLAIT_TIMELINE_H

#include <stddef.h>

#include "plait/plait.h"

/* The names the engine writes, each spelled only here: plait_tl_activity_t
 * and plait_tl_name come from this one list, and docs/timeline.md lists
 * every name (test_docs). On a tensor's row they nest in this order, with
 * the transport's collective (plait_tl_op_name) between MEMCPY_IN and
 * MEMCPY_OUT; CYCLE is the coordinator row's instant marker. */
#define PLAIT_TL_ACTIVITIES(X)                                                      \
  X(NEGOTIATE, "NEGOTIATE")                  /* submitted .. agreed */              \
  X(QUEUE, "QUEUE")                          /* agreed .. its collective runs */    \
  X(MEMCPY_IN, "MEMCPY_IN_FUSION_BUFFER")    /* into the fusion buffer */           \
  X(MEMCPY_OUT, "MEMCPY_OUT_FUSION_BUFFER")  /* out of the fusion buffer */         \
  X(CYCLE, "CYCLE")                          /* a coordinator cycle that did work */

typedef enum {
#define PLAIT_TL_ENUM_(id, text) PLAIT_TL_##id,
  PLAIT_TL_ACTIVITIES(PLAIT_TL_ENUM_)
#undef PLAIT_TL_ENUM_
  PLAIT_TL_ACTIVITY_COUNT
} plait_tl_activity_t;

/* "MEMCPY_IN_FUSION_BUFFER" for PLAIT_TL_MEMCPY_IN, ...; NULL for a value
 * outside the list (which plait_tl_begin and the others then ignore). Pure. */
static inline const char *plait_tl_name(plait_tl_activity_t a) {
  static const char *const names[] = {
#define PLAIT_TL_TEXT_(id, text) text,
      PLAIT_TL_ACTIVITIES(PLAIT_TL_TEXT_)
#undef PLAIT_TL_TEXT_
  };
  return (unsigned)a < PLAIT_TL_ACTIVITY_COUNT ? names[a] : NULL;
}

/* A transport collective's activity, "<TRANSPORT>_<OP>" in capitals
 * ("gloo", "allreduce" -> "GLOO_ALLREDUCE"), into out (cut to cap - 1
 * bytes; cap > 0). Pure. */
void plait_tl_op_name(char *out, size_t cap, const char *transport, const char *op);

/* One engine's timeline: its queue, name tables and writer thread. */
typedef struct plait_timeline plait_timeline_t;

/* A timeline that is not writing (NULL when out of memory). Destroy stops it
 * first; both accept NULL. */
plait_timeline_t *plait_tl_create(void);
void plait_tl_destroy(plait_timeline_t *tl);

/* Starts writing to path for this rank (pid field = rank); replaces a
 * timeline already running (which is closed properly first). Errors (set
 * with plait_error): PLAIT_ERR_INVALID_ARGUMENT (NULL or empty path, rank <
 * 0), PLAIT_ERR_SYSTEM (names the path and the reason), PLAIT_ERR_NO_MEMORY.
 * When path cannot be opened, a timeline already running keeps running. */
plait_result_t plait_tl_start(plait_timeline_t *tl, const char *path, int rank);
/* Flushes, closes the file (valid JSON), joins the thread. Harmless when none
 * is running. */
void plait_tl_stop(plait_timeline_t *tl);
/* 1 while a timeline is active. */
int plait_tl_active(plait_timeline_t *tl);

/* Begin and end activity on tensor's row (the row is named after the tensor
 * and created the first time the tensor is seen). Each row stays properly
 * nested: an end that does not close the innermost activity open on its row
 * is left out (so ending what has already ended is harmless, but end inner
 * activities before outer ones), and whatever is still open when the timeline
 * stops is ended then. NULL tensor or activity: nothing. Names are cut at
 * 1024 bytes. When the queue is full the event is dropped and counted. */
void plait_tl_begin(plait_timeline_t *tl, const char *tensor, const char *activity);
void plait_tl_end(plait_timeline_t *tl, const char *tensor, const char *activity);
/* An instant event on the coordinator's own row. */
void plait_tl_mark(plait_timeline_t *tl, const char *what);
/* The coordinator's CYCLE instant, written only while marking cycles is on
 * (PLAIT_TIMELINE_MARK_CYCLES; off at first). Any thread. */
void plait_tl_mark_cycle(plait_timeline_t *tl);
void plait_tl_set_mark_cycles(plait_timeline_t *tl, int on);

#endif
