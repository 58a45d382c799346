/* Shared between the files of the devsim test plugin (tests/plugins/devsim.c
 * and tests/plugins/devsim/): its device memory, user streams, gate and
 * counters. Not seen by tests (they use ../devsim.h). */
#ifndef PLAIT_DEVSIM_INTERNAL_H
#define PLAIT_DEVSIM_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "../devsim.h"
#include "plait/transport.h"

#define DEVSIM_EXPORT __attribute__((visibility("default")))

/* ---- memory.c: the disguised allocations ---- */

/* The real address of device range [dptr, dptr + bytes), or NULL when no
 * live allocation holds all of it (bytes 0: dptr must still be in one, or
 * NULL). */
void *devsim_real(const void *dptr, size_t bytes);
void *devsim_alloc_raw(size_t bytes);
int devsim_free_raw(void *dptr); /* 0, or -1 for a pointer not allocated */

/* ---- streams.c: user streams, gate, counters ---- */

typedef struct devsim_stream devsim_stream_t;

/* The stream object behind a pointer a test gave (NULL: the default
 * stream), or NULL when it is not one. */
devsim_stream_t *devsim_stream_of(void *stream);
/* Counts a ready call on s and returns the ticket to wait for: everything
 * enqueued on s so far. */
uint64_t devsim_stream_ticket(devsim_stream_t *s);
/* Blocks until s has run through ticket, or *stop becomes nonzero (checked
 * whenever devsim_wake is called). 0, or -1 when stopped. */
int devsim_stream_wait(devsim_stream_t *s, uint64_t ticket, const atomic_int *stop);
/* Blocks while the gate is closed, or until *stop becomes nonzero. */
void devsim_gate_wait(const atomic_int *stop);
/* Wakes every wait above (after setting a stop flag). */
void devsim_wake(void);

typedef struct devsim_stats {
  atomic_ullong batch_copy_calls, batch_copy_spans, identity_spans, collectives,
      mem_copy_calls, ready_calls, notify_calls, done_calls, interrupt_calls, failed_dones,
      collectives_run;
} devsim_stats_t;
extern devsim_stats_t devsim_stats;

void devsim_record_batch(const devsim_batch_record_t *r);
void devsim_record_interrupt(int rc, const char *why);

#endif
