/* A bootstrap over shared memory for forked ranks: see shm_bootstrap.h. */
#include "shm_bootstrap.h"

#include <stdatomic.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

struct shm_block {
  atomic_uint arrived;    /* ranks at the current barrier */
  atomic_uint generation; /* barriers completed */
  atomic_int failed;      /* a rank gave up or died: nobody waits any more */
  size_t bytes;           /* of the whole mapping */
  unsigned char slots[];  /* nranks * SHM_BOOTSTRAP_SLOT */
};

shm_block_t *shm_block_new(int nranks) {
  size_t bytes = sizeof(shm_block_t) + (size_t)nranks * SHM_BOOTSTRAP_SLOT;
  shm_block_t *b =
      mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (b == MAP_FAILED) return NULL;
  atomic_init(&b->arrived, 0);
  atomic_init(&b->generation, 0);
  atomic_init(&b->failed, 0);
  b->bytes = bytes;
  return b;
}

void shm_block_fail(shm_block_t *b) { atomic_store(&b->failed, 1); }

void shm_block_free(shm_block_t *b) {
  if (b) munmap(b, b->bytes);
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* All ranks meet; the last to arrive releases the others. */
static plait_result_t boot_barrier(void *ctx) {
  shm_rank_t *r = ctx;
  shm_block_t *b = r->block;
  unsigned gen = atomic_load(&b->generation);
  if (atomic_fetch_add(&b->arrived, 1) + 1 == (unsigned)r->nranks) {
    atomic_store(&b->arrived, 0);
    atomic_fetch_add(&b->generation, 1);
    return PLAIT_SUCCESS;
  }
  double deadline = now_s() + r->timeout_s;
  while (atomic_load(&b->generation) == gen) {
    if (atomic_load(&b->failed)) return PLAIT_ERR_PEER_LOST;
    if (now_s() > deadline) {
      shm_block_fail(b);
      return PLAIT_ERR_TIMEOUT;
    }
    nanosleep(&(struct timespec){0, 50000}, NULL);
  }
  return PLAIT_SUCCESS;
}

static unsigned char *slot(shm_rank_t *r, int rank) {
  return r->block->slots + (size_t)rank * SHM_BOOTSTRAP_SLOT;
}

/* The leading barrier keeps a rank from overwriting a slot that another is
 * still reading from the previous collective. */
static plait_result_t boot_allgather(void *ctx, const void *send, size_t bytes, void *recv) {
  shm_rank_t *r = ctx;
  if (bytes > SHM_BOOTSTRAP_SLOT) {
    shm_block_fail(r->block);
    return PLAIT_ERR_UNSUPPORTED;
  }
  plait_result_t rc = boot_barrier(ctx);
  if (rc) return rc;
  if (bytes) memcpy(slot(r, r->rank), send, bytes);
  if ((rc = boot_barrier(ctx))) return rc;
  for (int q = 0; q < r->nranks && bytes; q++)
    memcpy((unsigned char *)recv + (size_t)q * bytes, slot(r, q), bytes);
  return PLAIT_SUCCESS;
}

static plait_result_t boot_broadcast(void *ctx, void *buf, size_t bytes, int root) {
  shm_rank_t *r = ctx;
  if (bytes > SHM_BOOTSTRAP_SLOT || root < 0 || root >= r->nranks) {
    shm_block_fail(r->block);
    return bytes > SHM_BOOTSTRAP_SLOT ? PLAIT_ERR_UNSUPPORTED : PLAIT_ERR_INVALID_ARGUMENT;
  }
  plait_result_t rc = boot_barrier(ctx);
  if (rc) return rc;
  if (r->rank == root && bytes) memcpy(slot(r, 0), buf, bytes);
  if ((rc = boot_barrier(ctx))) return rc;
  if (r->rank != root && bytes) memcpy(buf, slot(r, 0), bytes);
  return PLAIT_SUCCESS;
}

void shm_bootstrap_init(shm_rank_t *r, shm_block_t *block, int rank, int nranks,
                        double timeout_s, plait_bootstrap_t *out) {
  r->block = block;
  r->rank = rank;
  r->nranks = nranks;
  r->timeout_s = timeout_s;
  memset(out, 0, sizeof *out);
  out->size = sizeof *out;
  out->ctx = r;
  out->rank = rank;
  out->nranks = nranks;
  out->allgather = boot_allgather;
  out->broadcast = boot_broadcast;
  out->barrier = boot_barrier;
}
