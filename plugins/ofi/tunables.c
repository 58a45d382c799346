#include "tunables.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plait/parse_size.h"

extern char **environ;

#define KIB ((uint64_t)1024)

static plait_result_t size_var(const char *name, uint64_t def, uint64_t min, uint64_t *out,
                               char *err, size_t err_len) {
  const char *v = getenv(name);
  *out = def;
  if (!v) return PLAIT_SUCCESS;
  if (plait_parse_size(v, out) != 0 || *out < min) {
    snprintf(err, err_len,
             "%s='%s' is not valid: expected a size of at least %llu bytes such as 65536, "
             "64K, 1M or 1G (K = 1024)",
             name, v, (unsigned long long)min);
    return PLAIT_ERR_CONFIG;
  }
  return PLAIT_SUCCESS;
}

plait_result_t ofi_tunables_read(ofi_tunables_t *t, int nranks, char *err, size_t err_len) {
  plait_result_t rc;
  memset(t, 0, sizeof *t);
  if ((rc = size_var("PLAIT_OFI_CHUNK", OFI_DEFAULT_CHUNK, 4 * KIB, &t->chunk, err, err_len)) ||
      (rc = size_var("PLAIT_OFI_ALLREDUCE_RING_MIN",
                     nranks == 2 ? OFI_DEFAULT_ALLREDUCE_RING_MIN_2RANKS
                                 : OFI_DEFAULT_ALLREDUCE_RING_MIN, 0, &t->allreduce_ring_min, err,
                     err_len)) ||
      (rc = size_var("PLAIT_OFI_ALLGATHERV_RING_MIN", OFI_DEFAULT_ALLGATHERV_RING_MIN, 0, &t->allgatherv_ring_min,
                     err, err_len)) ||
      (rc = size_var("PLAIT_OFI_BROADCAST_CHAIN_MIN", OFI_DEFAULT_BROADCAST_CHAIN_MIN, 0, &t->broadcast_chain_min,
                     err, err_len)) ||
      (rc = size_var("PLAIT_OFI_REDUCESCATTER_RING_MIN", OFI_DEFAULT_REDUCESCATTER_RING_MIN, 0,
                     &t->reducescatter_ring_min, err, err_len)) ||
      (rc = size_var("PLAIT_OFI_HUGE_PAGES_MIN", OFI_DEFAULT_HUGE_PAGES_MIN, 0, &t->huge_min,
                     err, err_len)) ||
      (rc = size_var("PLAIT_OFI_SPANS_MIN", OFI_DEFAULT_SPANS_MIN, 0, &t->spans_min, err,
                     err_len)))
    return rc;
  const char *w = getenv("PLAIT_OFI_WINDOW");
  t->window = OFI_DEFAULT_WINDOW;
  if (w) {
    char *end = NULL;
    errno = 0;
    long v = strtol(w, &end, 10);
    if (errno || end == w || *end || v < 1 || v > 64) {
      snprintf(err, err_len,
               "PLAIT_OFI_WINDOW='%s' is not valid: expected an integer from 1 to 64 "
               "(chunks in flight per link)",
               w);
      return PLAIT_ERR_CONFIG;
    }
    t->window = (uint64_t)v;
  }
  const char *mr = getenv("PLAIT_OFI_MR");
  if (mr && strcmp(mr, "auto") != 0 && strcmp(mr, "always") != 0) {
    snprintf(err, err_len,
             "PLAIT_OFI_MR='%s' is not valid: expected 'auto' (register memory when the "
             "provider's mr_mode asks for it) or 'always'",
             mr);
    return PLAIT_ERR_CONFIG;
  }
  t->mr_always = mr && strcmp(mr, "always") == 0;
  const char *d = getenv("PLAIT_OFI_DIRECT");
  if (d && strcmp(d, "auto") != 0 && strcmp(d, "off") != 0) {
    snprintf(err, err_len,
             "PLAIT_OFI_DIRECT='%s' is not valid: expected 'auto' (a fused allreduce over shm "
             "reads the peers' memory directly where every rank can) or 'off'",
             d);
    return PLAIT_ERR_CONFIG;
  }
  t->direct = !d || strcmp(d, "auto") == 0;
  return PLAIT_SUCCESS;
}

/* Every PLAIT_OFI_* variable this plugin reads (docs/configuration.md). */
static const char *const known[] = {
    "PLAIT_OFI_CHUNK", "PLAIT_OFI_WINDOW", "PLAIT_OFI_ALLREDUCE_RING_MIN",
    "PLAIT_OFI_ALLGATHERV_RING_MIN", "PLAIT_OFI_BROADCAST_CHAIN_MIN",
    "PLAIT_OFI_REDUCESCATTER_RING_MIN", "PLAIT_OFI_MR", "PLAIT_OFI_HUGE_PAGES_MIN",
    "PLAIT_OFI_SPANS_MIN", "PLAIT_OFI_DIRECT", "PLAIT_OFI_YIELD_US"};

int ofi_tunables_unknown(char *buf, size_t len) {
  int n = 0;
  size_t used = 0;
  if (len) buf[0] = '\0';
  for (char **e = environ; e && *e; e++) {
    if (strncmp(*e, "PLAIT_OFI_", 10) != 0) continue;
    size_t name_len = strcspn(*e, "=");
    int ok = 0;
    for (size_t i = 0; i < sizeof known / sizeof known[0] && !ok; i++)
      ok = strlen(known[i]) == name_len && strncmp(known[i], *e, name_len) == 0;
    if (ok) continue;
    if (used < len) {
      int w = snprintf(buf + used, len - used, "%s%.*s", n ? ", " : "", (int)name_len, *e);
      if (w > 0) used += (size_t)w;
    }
    n++;
  }
  return n;
}

static void put64(unsigned char *p, uint64_t v) {
  for (int i = 0; i < 8; i++) p[i] = (unsigned char)(v >> (8 * i));
}
static uint64_t get64(const unsigned char *p) {
  uint64_t v = 0;
  for (int i = 0; i < 8; i++) v |= (uint64_t)p[i] << (8 * i);
  return v;
}

void ofi_tunables_encode(const ofi_tunables_t *t, unsigned char *out) {
  const uint64_t v[10] = {t->chunk, t->window, t->allreduce_ring_min, t->allgatherv_ring_min,
                          t->broadcast_chain_min, t->reducescatter_ring_min, t->mr_always,
                          t->huge_min, t->spans_min, t->direct};
  for (int i = 0; i < 10; i++) put64(out + 8 * i, v[i]);
}

void ofi_tunables_decode(ofi_tunables_t *t, const unsigned char *in) {
  t->chunk = get64(in);
  t->window = get64(in + 8);
  t->allreduce_ring_min = get64(in + 16);
  t->allgatherv_ring_min = get64(in + 24);
  t->broadcast_chain_min = get64(in + 32);
  t->reducescatter_ring_min = get64(in + 40);
  t->mr_always = get64(in + 48);
  t->huge_min = get64(in + 56);
  t->spans_min = get64(in + 64);
  t->direct = get64(in + 72);
}
