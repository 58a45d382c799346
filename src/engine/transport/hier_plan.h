/*
 * Internal: the plan of the hierarchical allreduce, pure functions (no
 * transport, no I/O), unit-tested by tests/core/test_hier_plan.c.
 *
 * When ranks share hosts (every host the same number L >= 2 of ranks, at
 * least 2 hosts), an allreduce of the global set can run as
 *   1. an allreduce among the L ranks of each host (the host's sum on each;
 *      cut into L shards, local index i owns shard i),
 *   2. an allreduce of shard i among the ranks of local index i on every
 *      host (the cross set i: L allreduces across hosts, in parallel, each
 *      of 1/L of the message),
 *   3. an allgather of the shards among the L ranks of each host.
 * Each host then sends 2 (H-1)/H of the message across hosts in all (the
 * flat ring on H x L ranks crosses the host boundary on H of its links, each
 * carrying 2 (HL-1)/(HL) of it). Step 1 is an allreduce, not the
 * reduce-scatter that would move (L-1)/L of the message less within the
 * host, because every plugin's allreduce is its fastest collective: gloo's
 * reducescatter (an alltoallv) took 0.85-1.29 s for 64 MiB on 2 ranks of a
 * namespace host where its allreduce took 0.12-0.29 s (docs/performance.md).
 *
 * The layout comes from every rank's host identity (a 64-bit hash of its
 * PLAIT_HOSTNAME / host name), indexed by rank: hosts numbered in the order
 * of their lowest rank, a rank's local index its place among its host's
 * ranks in increasing order.
 */
#ifndef PLAIT_HIER_PLAN_H
#define PLAIT_HIER_PLAN_H

#include <stddef.h>
#include <stdint.h>

#include "plait/plait.h"

typedef enum {
  PLAIT_HIER_OFF = 0,  /* never: every allreduce over all ranks at once */
  PLAIT_HIER_ON = 1,   /* every allreduce of the global set that can be cut */
  PLAIT_HIER_AUTO = 2, /* from PLAIT_HIERARCHICAL_THRESHOLD bytes up */
} plait_hier_mode_t;

/* The value of var (PLAIT_HIERARCHICAL_ALLREDUCE or _ALLGATHER): auto; on,
 * 1, true, yes; off, 0, false, no (any case). PLAIT_ERR_CONFIG naming var
 * and what it accepts otherwise. */
plait_result_t plait_hier_parse_mode(const char *var, const char *text, plait_hier_mode_t *mode);
const char *plait_hier_mode_name(plait_hier_mode_t mode);

/* FNV-1a, 64 bits: a host identity as the ranks exchange it. */
uint64_t plait_hier_host_hash(const char *host);

/* The layout of size ranks from host[r] (their identities' hashes): writes
 * host_of[r] (host number) and index_of[r] (local index) for every rank and
 * *hosts, *per_host. Returns 1 when the hierarchical allreduce fits (>= 2
 * hosts, every host the same number >= 2 of ranks); 0 otherwise, with why
 * (cap bytes) saying what does not fit. */
int plait_hier_layout(const uint64_t *host, int size, int *host_of, int *index_of, int *hosts,
                      int *per_host, char *why, size_t cap);

/* How many times fewer bytes each host sends across hosts in the
 * hierarchical allreduce than in the flat ring (ranks in rank order, as the
 * plugins' rings run): the most ring edges leaving one host, times
 * (size-1)/size, over (hosts-1)/hosts. 1.5 for 2 hosts x 2 ranks placed by
 * block (ranks 0, 1 on one host), 3 placed cyclically (0, 2 on one host),
 * 1.25 for 3 x 2 by block. */
double plait_hier_flat_gain(const int *host_of, int size, int hosts);

/* The ranks r with of[r] == which, increasing, into out; their number. */
int plait_hier_members(const int *of, int size, int which, int *out);

/* Auto runs hierarchically only where it sends at least this many times
 * fewer bytes across hosts than the flat ring (plait_hier_flat_gain):
 * measured on namespace hosts, a gain of 3 (cyclic placement) ran 1.98x
 * faster, gains of 1.5 and 1.25 (block placement) 0.67-1.01x and 0.87x
 * (docs/performance.md). */
#define PLAIT_HIER_AUTO_MIN_GAIN 2.0

/* Whether an allreduce of count elements, bytes in all, runs hierarchically:
 * never when off or when count < per_host (a shard per local rank could not
 * be cut: then even "on" runs flat); always when on; when auto, from
 * threshold bytes up where the layout's gain (plait_hier_flat_gain) is at
 * least PLAIT_HIER_AUTO_MIN_GAIN. The same answer on every rank (one mode
 * and threshold for the job: rank 0's; one layout). */
int plait_hier_wanted(plait_hier_mode_t mode, uint64_t threshold, size_t count, size_t bytes,
                      int per_host, double gain);

/* The shards of count elements over n local ranks: counts[i] = count / n, the
 * first count % n one more; offs[i] their starts (n + 1 entries). */
void plait_hier_shards(size_t count, int n, size_t *counts, size_t *offs);

#endif
