/*
 * Internal: the Chrome-trace timeline (chrome://tracing, Perfetto).
 *
 * One row per tensor (a "thread" named after the tensor), activities as
 * begin/end pairs: NEGOTIATE, QUEUE, MEMCPY_IN_FUSION_BUFFER,
 * <TRANSPORT>_<OP> (e.g. GLOO_ALLREDUCE), MEMCPY_OUT_FUSION_BUFFER; optional
 * instant markers for coordinator cycles. Events are queued and written by the
 * timeline's own thread, so emitting never waits for the disk. The file is a
 * JSON array that is complete and valid after every write.
 *
 * Every plait_tl_* function is a cheap no-op while no timeline is active, may
 * be called from any thread, and never blocks on I/O. Strings are copied.
 */
#ifndef PLAIT_TIMELINE_H
#define PLAIT_TIMELINE_H

#include "plait/plait.h"

/* Starts writing to path for this rank (pid field = rank); replaces a
 * timeline already running (which is closed properly first). */
plait_result_t plait_tl_start(const char *path, int rank);
/* Flushes, closes the file (valid JSON), joins the thread. Harmless when none
 * is running. */
void plait_tl_stop(void);
/* 1 while a timeline is active. */
int plait_tl_active(void);

void plait_tl_begin(const char *tensor, const char *activity);
void plait_tl_end(const char *tensor, const char *activity);
/* An instant event on the coordinator's own row, e.g. "CYCLE". */
void plait_tl_mark(const char *what);

#endif
