/* Fusion planning and the fusion-buffer layout: pure functions. */
#include "engine/negotiate/fusion.h"

#include "engine/submit/entry.h"

uint64_t plait_fusion_layout_add(plait_fusion_layout_t *l, uint64_t bytes) {
  uint64_t at = l->padded;
  l->padded += (bytes + PLAIT_FUSION_ALIGN - 1) / PLAIT_FUSION_ALIGN * PLAIT_FUSION_ALIGN;
  l->n++;
  l->size = l->n == 1 ? bytes : l->padded;
  return at;
}

static int same_key(const plait_fusion_key_t *a, const plait_fusion_key_t *b) {
  return a->pset == b->pset && a->dtype == b->dtype && a->op == b->op && a->prescale == b->prescale &&
         a->postscale == b->postscale && a->device == b->device;
}

/* The open bin of its key that it fits in, or -1; bins it does not fit close. */
static int find_bin(const plait_fusion_item_t *items, const plait_fusion_item_t *it,
                    uint64_t threshold, plait_fusion_bin_t *bins, int nb) {
  for (int j = 0; j < nb; j++) {
    if (!bins[j].open || !same_key(&items[bins[j].first].key, &it->key)) continue;
    plait_fusion_layout_t with = bins[j].layout;
    plait_fusion_layout_add(&with, it->bytes);
    if (with.size <= threshold) return j;
    bins[j].open = 0; /* full: later ones start a new bin */
  }
  return -1;
}

int plait_fusion_plan(const plait_fusion_item_t *items, int n, uint64_t threshold,
                      uint64_t max_tensor, plait_fusion_bin_t *bins, int *bin_of) {
  int nb = 0;
  for (int i = 0; i < n; i++) {
    const plait_fusion_item_t *it = &items[i];
    /* A tensor over max_tensor runs alone, in place: copying it through the
     * buffer costs more than the collective it would save. */
    int fusible = !it->failed && !it->solo && it->coll == PLAIT_COLL_ALLREDUCE && threshold > 0 &&
                  (max_tensor == 0 || it->bytes <= max_tensor);
    int b = fusible ? find_bin(items, it, threshold, bins, nb) : -1;
    if (b < 0) {
      b = nb++;
      bins[b] = (plait_fusion_bin_t){.first = i, .open = fusible};
    }
    plait_fusion_layout_add(&bins[b].layout, it->bytes);
    bins[b].count++;
    bin_of[i] = b;
  }
  return nb;
}
