/* The hierarchical allreduce's plan: layout, decision, shards (hier_plan.h). */
#include "engine/transport/hier_plan.h"

#include <stdio.h>
#include <stdlib.h>
#include <strings.h>

#include "util/error.h"

plait_result_t plait_hier_parse_mode(const char *var, const char *text, plait_hier_mode_t *mode) {
  static const char *on[] = {"on", "1", "true", "yes"}, *off[] = {"off", "0", "false", "no"};
  const char *t = text ? text : "";
  if (!strcasecmp(t, "auto")) return *mode = PLAIT_HIER_AUTO, PLAIT_SUCCESS;
  for (int i = 0; i < 4; i++) {
    if (!strcasecmp(t, on[i])) return *mode = PLAIT_HIER_ON, PLAIT_SUCCESS;
    if (!strcasecmp(t, off[i])) return *mode = PLAIT_HIER_OFF, PLAIT_SUCCESS;
  }
  return plait_error(PLAIT_ERR_CONFIG, "%s='%s' is not valid: expected auto, on or off (also "
                     "1/0, true/false, yes/no)", var, t);
}

const char *plait_hier_mode_name(plait_hier_mode_t mode) {
  return mode == PLAIT_HIER_ON ? "on" : mode == PLAIT_HIER_OFF ? "off" : "auto";
}

uint64_t plait_hier_host_hash(const char *host) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (const unsigned char *p = (const unsigned char *)host; p && *p; p++)
    h = (h ^ *p) * 0x100000001b3ull;
  return h;
}

int plait_hier_layout(const uint64_t *host, int size, int *host_of, int *index_of, int *hosts,
                      int *per_host, char *why, size_t cap) {
  int nh = 0;
  int *count = calloc((size_t)(size > 0 ? size : 1), sizeof *count);
  if (!count) {
    snprintf(why, cap, "out of memory");
    return 0;
  }
  for (int r = 0; r < size; r++) { /* hosts in the order of their lowest rank */
    int h = -1;
    for (int q = 0; q < r && h < 0; q++)
      if (host[q] == host[r]) h = host_of[q];
    if (h < 0) h = nh++;
    host_of[r] = h;
    index_of[r] = count[h]++;
  }
  *hosts = nh;
  *per_host = nh ? count[0] : 0;
  int ok = 1;
  for (int h = 1; h < nh && ok; h++)
    if (count[h] != count[0]) {
      ok = 0;
      snprintf(why, cap, "hosts hold different numbers of ranks (host of rank 0: %d, host %d: %d)",
               count[0], h, count[h]);
    }
  if (ok && nh < 2) ok = 0, snprintf(why, cap, "every rank is on one host");
  if (ok && count[0] < 2) ok = 0, snprintf(why, cap, "one rank per host");
  free(count);
  return ok;
}

int plait_hier_members(const int *of, int size, int which, int *out) {
  int n = 0;
  for (int r = 0; r < size; r++)
    if (of[r] == which) out[n++] = r;
  return n;
}

double plait_hier_flat_gain(const int *host_of, int size, int hosts) {
  if (hosts < 2 || size < 2) return 0.0;
  int most = 0;
  for (int h = 0; h < hosts; h++) {
    int edges = 0; /* ring edges r -> r + 1 leaving host h */
    for (int r = 0; r < size; r++)
      edges += host_of[r] == h && host_of[(r + 1) % size] != h;
    if (edges > most) most = edges;
  }
  return most * ((double)(size - 1) / size) / ((double)(hosts - 1) / hosts);
}

double plait_hier_auto_min_gain(int local_shm) {
  return local_shm ? PLAIT_HIER_AUTO_MIN_GAIN_SHM : PLAIT_HIER_AUTO_MIN_GAIN;
}

int plait_hier_wanted(plait_hier_mode_t mode, uint64_t threshold, size_t count, size_t bytes,
                      int per_host, double gain, double min_gain) {
  if (mode == PLAIT_HIER_OFF || per_host < 2 || count < (size_t)per_host) return 0;
  return mode == PLAIT_HIER_ON || (bytes >= threshold && gain >= min_gain);
}

void plait_hier_shards(size_t count, int n, size_t *counts, size_t *offs) {
  size_t at = 0;
  for (int i = 0; i < n; i++) {
    counts[i] = count / (size_t)n + ((size_t)i < count % (size_t)n);
    offs[i] = at;
    at += counts[i];
  }
  offs[n] = at;
}
