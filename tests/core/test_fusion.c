/*
 * Tests of fusion planning and the fusion-buffer layout (src/engine/negotiate/fusion.c).
 *
 * Property-style: many random item sets from a fixed seed (printed with every
 * failure, with the trial, so a failure can be replayed alone) are planned and
 * checked against invariants: every item planned exactly once, in order; one
 * dtype/op/scale/device per fused bin; never over the threshold except a lone
 * tensor; max tensor respected; layout offsets aligned, non-overlapping,
 * inside the buffer and identical between the planner's bins and a layout
 * built the way the executor builds it. The plan is also compared with a
 * specification written here independently: per key, one current bin.
 */
#include <criterion/criterion.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/submit/entry.h"
#include "engine/negotiate/fusion.h"

#define SEED 0x5EED2026u
#define TRIALS 3000
#define MAXN 160

static uint64_t rng;
static uint32_t next(void) {
  rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
  return (uint32_t)(rng >> 11);
}

static uint64_t round_up(uint64_t b) { return (b + 63) / 64 * 64; }

/* ---------------------------------------------------------------- layout */

Test(fusion, layout_of_one_tensor_is_not_padded) {
  plait_fusion_layout_t l = {0};
  cr_assert_eq(plait_fusion_layout_add(&l, 10), 0);
  cr_assert_eq(l.size, 10, "a lone tensor of 10 bytes: buffer of %" PRIu64, l.size);
  cr_assert_eq(l.n, 1);
}

Test(fusion, layout_pads_every_slot_once_there_are_two) {
  plait_fusion_layout_t l = {0};
  cr_assert_eq(plait_fusion_layout_add(&l, 10), 0);
  cr_assert_eq(plait_fusion_layout_add(&l, 64), 64);
  cr_assert_eq(l.size, 128);
  cr_assert_eq(plait_fusion_layout_add(&l, 65), 128);
  cr_assert_eq(l.size, 256);
  cr_assert_eq(plait_fusion_layout_add(&l, 0), 256, "an empty tensor starts at the end");
  cr_assert_eq(l.size, 256);
  cr_assert_eq(plait_fusion_layout_add(&l, 1), 256);
  cr_assert_eq(l.size, 320);
  cr_assert_eq(PLAIT_FUSION_ALIGN, 64);
}

/* Random sizes: offsets aligned, slots disjoint and inside the buffer. */
Test(fusion, layout_properties) {
  rng = SEED;
  for (int trial = 0; trial < TRIALS; trial++) {
    uint32_t n = 1 + next() % 50;
    uint64_t bytes[50], offs[50];
    plait_fusion_layout_t l = {0};
    for (uint32_t i = 0; i < n; i++) {
      bytes[i] = next() % 4 == 0 ? next() % 130 : next() % 5000;
      offs[i] = plait_fusion_layout_add(&l, bytes[i]);
    }
    for (uint32_t i = 0; i < n; i++) {
      cr_assert_eq(offs[i] % PLAIT_FUSION_ALIGN, 0, "seed %#x trial %d: offset %" PRIu64, SEED,
                   trial, offs[i]);
      cr_assert_leq(offs[i] + bytes[i], l.size, "seed %#x trial %d: tensor %u past the buffer",
                    SEED, trial, i);
      if (i + 1 < n)
        cr_assert_leq(offs[i] + bytes[i], offs[i + 1], "seed %#x trial %d: %u overlaps %u", SEED,
                      trial, i, i + 1);
    }
    uint64_t want = 0;
    for (uint32_t i = 0; i < n; i++) want += round_up(bytes[i]);
    if (n == 1) want = bytes[0];
    cr_assert_eq(l.size, want, "seed %#x trial %d: size %" PRIu64 ", want %" PRIu64, SEED, trial,
                 l.size, want);
  }
}

/* ------------------------------------------------------------- examples */

static plait_fusion_item_t ar(uint8_t dtype, uint64_t bytes) {
  return (plait_fusion_item_t){.coll = PLAIT_COLL_ALLREDUCE,
                               .key = {.dtype = dtype, .op = PLAIT_OP_SUM, .device = -1,
                                       .prescale = 1.0, .postscale = 1.0},
                               .bytes = bytes};
}

Test(fusion, interleaved_dtypes_fuse_per_dtype_looking_past_others) {
  plait_fusion_item_t it[6] = {ar(PLAIT_FLOAT32, 40), ar(PLAIT_FLOAT16, 40),
                               ar(PLAIT_FLOAT32, 40), ar(PLAIT_FLOAT16, 40),
                               ar(PLAIT_FLOAT32, 40), ar(PLAIT_FLOAT16, 40)};
  it[2].coll = PLAIT_COLL_BROADCAST; /* a broadcast in between */
  plait_fusion_bin_t bins[6];
  int bin_of[6];
  int nb = plait_fusion_plan(it, 6, 1 << 20, 0, bins, bin_of);
  cr_assert_eq(nb, 3);
  int want[6] = {0, 1, 2, 1, 0, 1};
  for (int i = 0; i < 6; i++) cr_assert_eq(bin_of[i], want[i], "item %d in bin %d", i, bin_of[i]);
  cr_assert_eq(bins[0].count, 2);
  cr_assert_eq(bins[1].count, 3);
  cr_assert_eq(bins[1].layout.size, 192);
}

Test(fusion, threshold_is_measured_on_the_padded_layout) {
  plait_fusion_item_t it[3] = {ar(PLAIT_FLOAT32, 64), ar(PLAIT_FLOAT32, 60), ar(PLAIT_FLOAT32, 4)};
  plait_fusion_bin_t bins[3];
  int bin_of[3];
  int nb = plait_fusion_plan(it, 3, 128, 0, bins, bin_of);
  cr_assert_eq(nb, 2, "64 + pad(60) = 128 fits 128; a third slot does not");
  cr_assert_eq(bin_of[1], 0);
  cr_assert_eq(bin_of[2], 1);
  nb = plait_fusion_plan(it, 3, 191, 0, bins, bin_of);
  cr_assert_eq(nb, 2, "at 191 the third slot (to 192) does not fit");
  cr_assert_eq(bin_of[1], 0);
  cr_assert_eq(bin_of[2], 1);
  nb = plait_fusion_plan(it, 3, 127, 0, bins, bin_of);
  cr_assert_eq(nb, 3, "at 127 no two padded slots fit");
  nb = plait_fusion_plan(it, 3, 192, 0, bins, bin_of);
  cr_assert_eq(nb, 1);
  cr_assert_eq(bins[0].layout.size, 192);
}

Test(fusion, lone_oversized_tensor_max_tensor_and_no_fusion) {
  plait_fusion_item_t it[4] = {ar(PLAIT_FLOAT32, 4), ar(PLAIT_FLOAT32, 5000),
                               ar(PLAIT_FLOAT32, 4), ar(PLAIT_FLOAT32, 4)};
  plait_fusion_bin_t bins[4];
  int bin_of[4];
  int nb = plait_fusion_plan(it, 4, 1000, 0, bins, bin_of);
  cr_assert_eq(nb, 3, "the oversized tensor closes the open bin and is alone in its own");
  cr_assert_eq(bins[1].count, 1);
  cr_assert_eq(bins[1].layout.size, 5000, "over the threshold, but alone");
  cr_assert_eq(bin_of[2], 2);
  cr_assert_eq(bin_of[3], 2);
  nb = plait_fusion_plan(it, 4, 1 << 20, 100, bins, bin_of);
  cr_assert_eq(nb, 2, "5000 bytes > max tensor 100: alone, the others fuse");
  cr_assert_eq(bin_of[1], 1);
  cr_assert_eq(bins[1].open, 0);
  nb = plait_fusion_plan(it, 4, 0, 0, bins, bin_of);
  cr_assert_eq(nb, 4, "threshold 0: no fusion");
  it[2].failed = 1;
  nb = plait_fusion_plan(it, 4, 1 << 20, 0, bins, bin_of);
  cr_assert_eq(nb, 2, "a failed allreduce runs alone");
  cr_assert_eq(bin_of[2], 1);
  cr_assert_eq(bin_of[3], 0);
  cr_assert_eq(plait_fusion_plan(NULL, 0, 100, 0, NULL, NULL), 0);
}

/* ---------------------------------------------------------- properties */

static const uint8_t kDtypes[] = {PLAIT_FLOAT32, PLAIT_FLOAT16, PLAIT_INT64};
static const uint64_t kThresholds[] = {0, 1, 64, 100, 1000, 4096, 65536};
static const uint64_t kMaxTensor[] = {0, 0, 50, 500, 5000};

static void random_items(plait_fusion_item_t *it, int n) {
  for (int i = 0; i < n; i++) {
    memset(&it[i], 0, sizeof it[i]);
    uint32_t c = next() % 10;
    it[i].coll = c < 7 ? PLAIT_COLL_ALLREDUCE : (uint8_t)(2 + c % 6);
    it[i].failed = next() % 20 == 0;
    it[i].key.dtype = kDtypes[next() % 3];
    it[i].key.op = next() % 4 == 0 ? PLAIT_OP_AVERAGE : PLAIT_OP_SUM;
    it[i].key.device = next() % 8 == 0 ? 0 : -1;
    it[i].key.prescale = next() % 6 == 0 ? 0.5 : 1.0;
    it[i].key.postscale = next() % 6 == 0 ? 2.0 : 1.0;
    uint32_t s = next() % 10;
    it[i].bytes = s < 2 ? next() % 8 : s < 8 ? next() % 700 : 1000 + next() % 9000;
  }
}

static int same_key(const plait_fusion_key_t *a, const plait_fusion_key_t *b) {
  return a->dtype == b->dtype && a->op == b->op && a->device == b->device &&
         a->prescale == b->prescale && a->postscale == b->postscale;
}

/* The specification: a fusible item goes to the current bin of its key when
 * the padded sum stays within the threshold; otherwise that bin is done and
 * the item starts the key's new current bin. Everything else is alone. */
static int spec_plan(const plait_fusion_item_t *it, int n, uint64_t th, uint64_t max,
                     int *bin_of) {
  int cur[MAXN], ncur = 0, nb = 0;
  uint64_t padded[MAXN];
  for (int i = 0; i < n; i++) {
    int fusible = !it[i].failed && it[i].coll == PLAIT_COLL_ALLREDUCE && th > 0 &&
                  (max == 0 || it[i].bytes <= max);
    int k = -1;
    for (int j = 0; j < ncur && fusible && k < 0; j++)
      if (same_key(&it[cur[j] >> 16].key, &it[i].key)) k = j;
    if (k >= 0 && padded[k] + round_up(it[i].bytes) <= th) {
      bin_of[i] = cur[k] & 0xffff;
      padded[k] += round_up(it[i].bytes);
      continue;
    }
    bin_of[i] = nb++;
    if (!fusible) continue;
    if (k < 0) k = ncur++;
    cur[k] = i << 16 | bin_of[i];
    padded[k] = round_up(it[i].bytes);
  }
  return nb;
}

static void check_plan(const plait_fusion_item_t *it, int n, uint64_t th, uint64_t max,
                       const plait_fusion_bin_t *bins, int nb, const int *bin_of, int trial) {
#define WHERE "seed %#x trial %d (n %d, threshold %" PRIu64 ", max %" PRIu64 ")"
#define AT SEED, trial, n, th, max
  int seen[MAXN] = {0}, first[MAXN];
  for (int b = 0; b < nb; b++) first[b] = -1;
  for (int i = 0; i < n; i++) {
    cr_assert(bin_of[i] >= 0 && bin_of[i] < nb, WHERE ": item %d in bin %d of %d", AT, i,
              bin_of[i], nb);
    if (first[bin_of[i]] < 0) first[bin_of[i]] = i;
    seen[bin_of[i]]++;
  }
  for (int b = 0; b < nb; b++) {
    cr_assert_eq(seen[b], bins[b].count, WHERE ": bin %d counts %d, holds %d", AT, b,
                 bins[b].count, seen[b]);
    cr_assert_eq(first[b], bins[b].first, WHERE ": bin %d first %d, not %d", AT, b,
                 bins[b].first, first[b]);
    if (b > 0) cr_assert_lt(bins[b - 1].first, bins[b].first, WHERE ": bins out of order", AT);
    /* the members, as the executor lays them out */
    plait_fusion_layout_t l = {0};
    uint64_t prev_end = 0;
    for (int i = 0; i < n; i++) {
      if (bin_of[i] != b) continue;
      const plait_fusion_item_t *f = &it[bins[b].first];
      if (bins[b].count > 1) {
        cr_assert(it[i].coll == PLAIT_COLL_ALLREDUCE && !it[i].failed, WHERE
                  ": item %d (kind %u, failed %u) fused", AT, i, it[i].coll, it[i].failed);
        cr_assert(same_key(&it[i].key, &f->key), WHERE ": item %d fused with another key", AT, i);
        cr_assert(max == 0 || it[i].bytes <= max, WHERE ": item %d of %" PRIu64 " bytes fused", AT,
                  i, it[i].bytes);
      }
      uint64_t off = plait_fusion_layout_add(&l, it[i].bytes);
      cr_assert_eq(off % PLAIT_FUSION_ALIGN, 0, WHERE ": offset %" PRIu64, AT, off);
      cr_assert_geq(off, prev_end, WHERE ": item %d overlaps the one before", AT, i);
      prev_end = off + it[i].bytes;
    }
    cr_assert_leq(prev_end, l.size, WHERE ": bin %d's last tensor ends past the buffer", AT, b);
    cr_assert(l.n == bins[b].layout.n && l.size == bins[b].layout.size &&
              l.padded == bins[b].layout.padded, WHERE ": bin %d laid out as %" PRIu64
              " bytes by the planner, %" PRIu64 " by the executor", AT, b, bins[b].layout.size,
              l.size);
    if (bins[b].count > 1)
      cr_assert_leq(l.size, th, WHERE ": fused bin %d of %" PRIu64 " bytes", AT, b, l.size);
  }
#undef WHERE
#undef AT
}

Test(fusion, random_plans_keep_every_invariant_and_match_the_specification) {
  rng = SEED;
  static plait_fusion_item_t it[MAXN];
  static plait_fusion_bin_t bins[MAXN];
  static int bin_of[MAXN], want[MAXN];
  int fused = 0;
  for (int trial = 0; trial < TRIALS; trial++) {
    int n = (int)(next() % MAXN);
    uint64_t th = kThresholds[next() % 7], max = kMaxTensor[next() % 5];
    random_items(it, n);
    int nb = plait_fusion_plan(it, n, th, max, bins, bin_of);
    check_plan(it, n, th, max, bins, nb, bin_of, trial);
    int nwant = spec_plan(it, n, th, max, want);
    cr_assert_eq(nb, nwant, "seed %#x trial %d: %d bins, the specification has %d", SEED, trial,
                 nb, nwant);
    for (int i = 0; i < n; i++)
      cr_assert_eq(bin_of[i], want[i], "seed %#x trial %d: item %d in bin %d, specified %d", SEED,
                   trial, i, bin_of[i], want[i]);
    for (int b = 0; b < nb; b++) fused += bins[b].count > 1;
  }
  cr_assert_gt(fused, TRIALS, "the random sets should fuse often (fused bins: %d)", fused);
}
