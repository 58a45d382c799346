/*
 * batch_copy's table, made on the host in plain C (no CUDA: the unit test
 * tests/plugins/nccl/nccl_elem.c runs it without a GPU): one nc_span_ent_t (elem.h)
 * per non-empty span, with the chunk each starts at.
 */
#ifndef PLAIT_NCCL_BATCH_PLAN_H
#define PLAIT_NCCL_BATCH_PLAN_H

#include <stddef.h>

#include "elem.h"
#include "plait/transport.h"

/* Fills tab (room for n entries) from spans[0..n) of es-byte elements,
 * leaving out spans of count 0: *m entries, *chunks chunks in all. Returns 0,
 * or -1 with why (a NULL dst with a count, a count whose bytes overflow, more
 * than 2^32 - 1 spans) and nothing promised in tab. */
int nc_plan(const plait_span_t *spans, size_t n, size_t es, nc_span_ent_t *tab, uint32_t *m,
            uint64_t *chunks, char *why, size_t why_len);

#endif
