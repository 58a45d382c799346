/*
 * How the ofi plugin cuts allreduce_spans into ring chunks
 * (plugins/ofi/engine/spans.c), built from its source: every chunk within the
 * chunk size and the provider's pieces per message, whole elements, the
 * blocks covered exactly, the bound on the cuts kept, the same cuts as
 * before spans for one buffer, and the choice of the in-place ring.
 */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "engine/spans.h"
#include "engine/progress.h"

typedef struct {
  ofi_ring_t g;
  size_t off[8], len[8], *at;
  plait_span_t *spans;
} layout_t;

/* n spans of counts[] elements of es bytes over nranks even blocks. */
static void make(layout_t *l, const size_t *counts, size_t n, size_t es, int nranks) {
  memset(l, 0, sizeof *l);
  l->at = calloc(n + 1, sizeof *l->at);
  l->spans = calloc(n, sizeof *l->spans);
  cr_assert(l->at && l->spans);
  for (size_t i = 0; i < n; i++) {
    l->at[i + 1] = l->at[i] + counts[i] * es;
    l->spans[i] = (plait_span_t){(void *)(uintptr_t)(0x100000 * (i + 1)),
                                 (void *)(uintptr_t)(0x10000000 + 0x100000 * (i + 1)), counts[i]};
  }
  ofi_even_blocks(nranks, l->at[n] / es, es, l->off, l->len);
  l->g = (ofi_ring_t){.off = l->off, .len = l->len, .es = es, .spans = l->spans,
                      .span_at = l->at, .nspans = n};
}

/* Pieces of [a, a + len): spans it touches with bytes in it. */
static size_t pieces_in(const layout_t *l, size_t a, size_t len) {
  size_t p = 0;
  for (size_t i = 0; i < l->g.nspans; i++) {
    size_t lo = l->at[i] > a ? l->at[i] : a, hi = l->at[i + 1] < a + len ? l->at[i + 1] : a + len;
    if (hi > lo) p++;
  }
  return p;
}

static void check_cuts(const layout_t *l, int nranks, size_t chunk, size_t iov) {
  size_t max = ofi_ring_max_cuts(&l->g, nranks, chunk);
  size_t *cofs = malloc((max + 1) * sizeof *cofs), first[8], nch[8];
  cr_assert(cofs);
  cofs[max] = 0xDEADBEEF; /* a guard past the bound */
  size_t kmax = ofi_ring_cuts(&l->g, nranks, chunk, iov, cofs, first, nch), used = 0, top = 0;
  cr_assert_eq(cofs[max], 0xDEADBEEF, "ofi_ring_cuts wrote past ofi_ring_max_cuts");
  for (int b = 0; b < nranks; b++) {
    cr_assert_eq(cofs[first[b]], 0, "block %d starts at %zu", b, cofs[first[b]]);
    cr_assert_eq(cofs[first[b] + nch[b]], l->len[b], "block %d's cuts end at %zu, not %zu", b,
                 cofs[first[b] + nch[b]], l->len[b]);
    for (size_t k = 0; k < nch[b]; k++) {
      size_t a = cofs[first[b] + k], e = cofs[first[b] + k + 1];
      cr_assert_gt(e, a, "block %d chunk %zu is empty", b, k);
      cr_assert_leq(e - a, chunk, "block %d chunk %zu has %zu bytes > %zu", b, k, e - a, chunk);
      cr_assert_eq((e - a) % l->g.es, 0, "block %d chunk %zu cuts an element", b, k);
      size_t p = pieces_in(l, l->off[b] + a, e - a);
      cr_assert_leq(p, iov, "block %d chunk %zu spans %zu pieces > %zu", b, k, p, iov);
      /* a chunk ends early only where a bigger one would break a limit */
      if (k + 1 < nch[b] && e - a < chunk)
        cr_assert(p == iov || pieces_in(l, l->off[b] + a, e - a + l->g.es) > iov ||
                      l->at[ofi_span_of(&l->g, l->off[b] + e - 1) + 1] == l->off[b] + e,
                  "block %d chunk %zu ends early (%zu bytes, %zu pieces)", b, k, e - a, p);
    }
    used = first[b] + nch[b] + 1 > used ? first[b] + nch[b] + 1 : used;
    top = nch[b] > top ? nch[b] : top;
  }
  cr_assert_eq(kmax, top);
  cr_assert_leq(used, max);
  free(cofs);
}

Test(ofi_spans, one_buffer_is_cut_as_before) {
  /* without spans: chunk-sized chunks, the last of each block shorter */
  size_t off[3], len[3], first[3], nch[3];
  ofi_even_blocks(3, 1000003, 4, off, len);
  ofi_ring_t g = {.off = off, .len = len, .es = 4};
  size_t *cofs = calloc(ofi_ring_max_cuts(&g, 3, 65536), sizeof *cofs);
  cr_assert_not_null(cofs);
  size_t kmax = ofi_ring_cuts(&g, 3, 65536, 4, cofs, first, nch);
  for (int b = 0; b < 3; b++) {
    cr_assert_eq(nch[b], (len[b] + 65535) / 65536);
    for (size_t k = 0; k < nch[b]; k++)
      cr_assert_eq(cofs[first[b] + k], k * 65536);
  }
  cr_assert_eq(kmax, nch[0]);
  free(cofs);
}

Test(ofi_spans, gradients_of_64k_take_iov_limit_per_message) {
  size_t counts[200];
  for (int i = 0; i < 200; i++) counts[i] = 16384;
  layout_t l;
  make(&l, counts, 200, 4, 2);
  size_t max = ofi_ring_max_cuts(&l.g, 2, 1 << 20), first[2], nch[2];
  size_t *cofs = malloc(max * sizeof *cofs);
  ofi_ring_cuts(&l.g, 2, 1 << 20, 4, cofs, first, nch);
  /* 100 spans a block, 4 a message: 25 chunks of 256 KiB */
  cr_assert_eq(nch[0], 25);
  cr_assert_eq(nch[1], 25);
  cr_assert_eq(cofs[first[1] + 1], 4 * 65536);
  free(cofs);
  check_cuts(&l, 2, 1 << 20, 4);
  free(l.at), free(l.spans);
}

Test(ofi_spans, every_layout_keeps_the_limits) {
  srand(7);
  for (int round = 0; round < 300; round++) {
    size_t n = 1 + (size_t)rand() % 60, counts[60];
    for (size_t i = 0; i < n; i++)
      counts[i] = rand() % 5 == 0 ? 0 : (size_t)(rand() % 3 ? rand() % 50 : rand() % 40000);
    counts[rand() % n] += 1; /* never all empty */
    size_t es = (size_t)1 << (rand() % 4);
    int nranks = 2 + rand() % 6;
    size_t chunk = (size_t)(1 + rand() % 64) * 1024 * 8, iov = 1 + (size_t)rand() % 16;
    layout_t l;
    make(&l, counts, n, es, nranks);
    check_cuts(&l, nranks, chunk, iov);
    free(l.at), free(l.spans);
  }
}

Test(ofi_spans, span_of_skips_empty_spans) {
  size_t counts[] = {0, 3, 0, 0, 5, 0};
  layout_t l;
  make(&l, counts, 6, 4, 2);
  cr_assert_eq(ofi_span_of(&l.g, 0), 1);
  cr_assert_eq(ofi_span_of(&l.g, 11), 1);
  cr_assert_eq(ofi_span_of(&l.g, 12), 4);
  cr_assert_eq(ofi_span_of(&l.g, 31), 4);
  free(l.at), free(l.spans);
}

static ofi_state_t state(int nranks, size_t ring_min, size_t spans_min, int need_mr) {
  ofi_state_t st;
  memset(&st, 0, sizeof st);
  st.nranks = nranks;
  st.max_msg = SIZE_MAX;
  st.iov_limit = 4;
  st.need_mr = need_mr;
  st.tun.chunk = 1 << 20;
  st.tun.allreduce_ring_min = ring_min;
  st.tun.spans_min = spans_min;
  return st;
}

Test(ofi_spans, in_place_where_the_ring_runs_and_spans_are_not_tiny) {
  size_t counts[200];
  for (int i = 0; i < 200; i++) counts[i] = 16384;
  layout_t l;
  make(&l, counts, 200, 4, 2);
  size_t bytes = l.at[200];
  ofi_state_t st = state(2, 1 << 20, 32768, 0);
  cr_assert(ofi_spans_in_place(&st, &l.g, 200, bytes), "12.5 MiB of 64 KiB spans");
  st = state(2, 1 << 20, 65537, 0);
  cr_assert(!ofi_spans_in_place(&st, &l.g, 200, bytes), "spans below PLAIT_OFI_SPANS_MIN");
  st = state(2, 1 << 20, 0, 1);
  cr_assert(!ofi_spans_in_place(&st, &l.g, 200, bytes), "a provider that needs registration");
  st = state(2, 64 << 20, 0, 0);
  cr_assert(!ofi_spans_in_place(&st, &l.g, 200, bytes), "below the ring's size");
  free(l.at), free(l.spans);
}
