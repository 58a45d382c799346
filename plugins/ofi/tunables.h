/*
 * The plugin's own settings, PLAIT_OFI_* environment variables (the core
 * leaves that prefix to the plugin, which reports the ones it does not know). Parsed strictly at init; rank 0's values are
 * then broadcast so every rank picks the same algorithm for the same call.
 * Documented in docs/transport-ofi.md and docs/configuration.md.
 */
#ifndef PLAIT_OFI_TUNABLES_H
#define PLAIT_OFI_TUNABLES_H

#include <stddef.h>
#include <stdint.h>

#include "plait/transport.h"

/* Defaults: the switch points measured on a 2-core VM with 2 ranks
 * (docs/transport-ofi.md, "Switch points"). Sizes in bytes. */
#define OFI_DEFAULT_CHUNK (1024 * 1024)
#define OFI_DEFAULT_WINDOW 4
#define OFI_DEFAULT_ALLREDUCE_RING_MIN (64 * 1024)          /* 3 ranks and more */
#define OFI_DEFAULT_ALLREDUCE_RING_MIN_2RANKS (1024 * 1024) /* 2 ranks */
#define OFI_DEFAULT_ALLGATHERV_RING_MIN (256 * 1024)
#define OFI_DEFAULT_BROADCAST_CHAIN_MIN (1024 * 1024)
#define OFI_DEFAULT_REDUCESCATTER_RING_MIN (64 * 1024)
#define OFI_DEFAULT_HUGE_PAGES_MIN (4 * 1024 * 1024) /* hugepages.h */
#define OFI_DEFAULT_SPANS_MIN (32 * 1024) /* allreduce.c: allreduce_spans */

typedef struct ofi_tunables {
  uint64_t chunk;               /* PLAIT_OFI_CHUNK: pipeline chunk bytes */
  uint64_t window;              /* PLAIT_OFI_WINDOW: chunks in flight per link */
  uint64_t allreduce_ring_min;  /* PLAIT_OFI_ALLREDUCE_RING_MIN */
  uint64_t allgatherv_ring_min; /* PLAIT_OFI_ALLGATHERV_RING_MIN */
  uint64_t broadcast_chain_min; /* PLAIT_OFI_BROADCAST_CHAIN_MIN */
  uint64_t reducescatter_ring_min; /* PLAIT_OFI_REDUCESCATTER_RING_MIN */
  uint64_t mr_always;           /* PLAIT_OFI_MR=always (1) or auto (0) */
  uint64_t huge_min;            /* PLAIT_OFI_HUGE_PAGES_MIN; 0: off */
  uint64_t spans_min;           /* PLAIT_OFI_SPANS_MIN: mean span bytes for in place */
  uint64_t direct;              /* PLAIT_OFI_DIRECT=auto (1) or off (0): direct.c */
} ofi_tunables_t;

/* Reads the variables (defaults for a job of nranks); on a bad value returns
 * PLAIT_ERR_CONFIG with a message naming the variable, the value and what it
 * accepts. */
plait_result_t ofi_tunables_read(ofi_tunables_t *t, int nranks, char *err, size_t err_len);

/* Names the PLAIT_OFI_* variables set in the environment that the plugin does
 * not read (typos), comma-separated into buf (truncated to len); returns how
 * many there are. */
int ofi_tunables_unknown(char *buf, size_t len);

/* Explicit little-endian encoding, for the bootstrap broadcast. */
#define OFI_TUNABLES_WIRE 80
void ofi_tunables_encode(const ofi_tunables_t *t, unsigned char *out);
void ofi_tunables_decode(ofi_tunables_t *t, const unsigned char *in);

#endif
