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

/* Auto runs the hierarchical allreduce only where it sends at least this
 * many times fewer bytes across hosts than the flat ring
 * (plait_hier_flat_gain), by what the steps within the host run on. Over
 * the job's transport (loopback TCP between a host's ranks) a gain of 3
 * (cyclic placement) ran 1.98x faster than the flat ring and gains of 1.5
 * and 1.25 (block placement) 0.67-1.01x and 0.87x; over shared memory a
 * gain of 1.5 ran 1.36-1.49x (64 MiB over gloo and ofi, a ResNet-50 step)
 * and 1.25 0.94-1.05x (docs/performance.md). */
#define PLAIT_HIER_AUTO_MIN_GAIN 2.0     /* the steps within the host on the job's transport */
#define PLAIT_HIER_AUTO_MIN_GAIN_SHM 1.5 /* on shared memory (hier_local.h) */

/* The least gain auto runs at: PLAIT_HIER_AUTO_MIN_GAIN_SHM when local_shm
 * (every rank's steps within the host run over shared memory: all open it
 * or none does), else PLAIT_HIER_AUTO_MIN_GAIN. */
double plait_hier_auto_min_gain(int local_shm);

/* Whether an allreduce of count elements, bytes in all, runs hierarchically:
 * never when off or when count < per_host (a shard per local rank could not
 * be cut: then even "on" runs flat); always when on; when auto, from
 * threshold bytes up where the layout's gain (plait_hier_flat_gain) is at
 * least min_gain (plait_hier_auto_min_gain). A function of the response and
 * of what every rank holds alike (one mode, threshold and min_gain for the
 * job: rank 0's settings; one layout; shm on every rank or none), never of
 * timing: the same answer on every rank for the same response. */
int plait_hier_wanted(plait_hier_mode_t mode, uint64_t threshold, size_t count, size_t bytes,
                      int per_host, double gain, double min_gain);

/* The shards of count elements over n local ranks: counts[i] = count / n, the
 * first count % n one more; offs[i] their starts (n + 1 entries). */
void plait_hier_shards(size_t count, int n, size_t *counts, size_t *offs);

#endif
