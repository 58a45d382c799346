#include "batch_plan.h"

#include <stdint.h>
#include <stdio.h>

int nc_plan(const plait_span_t *spans, size_t n, size_t es, nc_span_ent_t *tab, uint32_t *m,
            uint64_t *chunks, char *why, size_t why_len) {
  *m = 0;
  *chunks = 0;
  if (n > UINT32_MAX) {
    snprintf(why, why_len, "%zu spans, at most %u in one call", n, UINT32_MAX);
    return -1;
  }
  for (size_t i = 0; i < n; i++) {
    const plait_span_t *sp = &spans[i];
    if (sp->count == 0) continue;
    if (sp->dst == NULL) {
      snprintf(why, why_len, "spans[%zu].dst is NULL with count %zu", i, sp->count);
      return -1;
    }
    if (sp->count > SIZE_MAX / es || sp->count * es > UINT64_MAX - NC_CHUNK_BYTES) {
      snprintf(why, why_len, "spans[%zu].count %zu of %zu-byte elements overflows", i, sp->count,
               es);
      return -1;
    }
    uint64_t bytes = (uint64_t)sp->count * es;
    uint64_t need = (bytes + NC_CHUNK_BYTES - 1) / NC_CHUNK_BYTES;
    if (*chunks > UINT64_MAX - need) {
      snprintf(why, why_len, "the spans' chunks overflow");
      return -1;
    }
    nc_span_ent_t *e = &tab[(*m)++];
    e->dst = (uint64_t)(uintptr_t)sp->dst;
    e->src = (uint64_t)(uintptr_t)sp->src;
    e->bytes = bytes;
    e->first_chunk = *chunks;
    *chunks += need;
  }
  return 0;
}
