/*
 * A plait_bootstrap_t of the benchmark's own, for ranks that are forked
 * processes of one parent: byte collectives through a shared-memory block
 * made before the fork. What the core's control plane gives a plugin, with
 * nothing of the core: the benchmark crosses the plugin boundary only
 * through include/plait/transport.h.
 *
 * Every rank calls the collectives in the same order (the plugin ABI's
 * rule). A rank waits at most timeout_s for the others, and stops waiting as
 * soon as any rank or the parent marks the block failed (a rank that died):
 * PLAIT_ERR_PEER_LOST, never a hang. Waiting sleeps 50 us between looks.
 */
#ifndef BENCH_SHM_BOOTSTRAP_H
#define BENCH_SHM_BOOTSTRAP_H

#include <stddef.h>

#include "plait/transport.h"

/* Largest allgather / broadcast, bytes per rank. */
#define SHM_BOOTSTRAP_SLOT (256u << 10)

typedef struct shm_block shm_block_t;

/* In the parent, before forking: a block for nranks ranks (MAP_SHARED).
 * NULL when mmap fails (errno set). */
shm_block_t *shm_block_new(int nranks);
/* Marks the block failed: every waiting rank returns PLAIT_ERR_PEER_LOST. */
void shm_block_fail(shm_block_t *b);
void shm_block_free(shm_block_t *b);

/* The per-rank handle behind a bootstrap; lives as long as the bootstrap. */
typedef struct shm_rank {
  shm_block_t *block;
  int rank;
  int nranks;
  double timeout_s;
} shm_rank_t;

/* In rank `rank` (after the fork): fills *out to use *r as its context. */
void shm_bootstrap_init(shm_rank_t *r, shm_block_t *block, int rank, int nranks,
                        double timeout_s, plait_bootstrap_t *out);

#endif
