/* devsim's device memory: host allocations handed out as disguised pointers
 * (real address + DEVSIM_DISGUISE, non-canonical on x86-64: dereferencing
 * one faults), in a registry so that every pointer the core passes is
 * checked to lie in a live allocation. Thread-safe (mem_alloc and mem_free
 * may be called from any thread). */
#include <stdlib.h>
#include <string.h>

#include "internal.h"

typedef struct block {
  uintptr_t dev; /* disguised address */
  size_t bytes;
} block_t;

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static block_t *blocks;
static size_t nblocks, capblocks;

void *devsim_alloc_raw(size_t bytes) {
  /* Fresh device memory is not zero: a core that relies on it is caught. */
  void *real = malloc(bytes ? bytes : 1);
  if (!real) return NULL;
  memset(real, 0xcd, bytes ? bytes : 1);
  pthread_mutex_lock(&mu);
  if (nblocks == capblocks) {
    size_t cap = capblocks ? capblocks * 2 : 64;
    block_t *b = realloc(blocks, cap * sizeof *b);
    if (!b) {
      pthread_mutex_unlock(&mu);
      free(real);
      return NULL;
    }
    blocks = b, capblocks = cap;
  }
  uintptr_t dev = (uintptr_t)real + (uintptr_t)DEVSIM_DISGUISE;
  blocks[nblocks++] = (block_t){dev, bytes};
  pthread_mutex_unlock(&mu);
  return (void *)dev;
}

int devsim_free_raw(void *dptr) {
  if (!dptr) return 0;
  pthread_mutex_lock(&mu);
  for (size_t i = 0; i < nblocks; i++)
    if (blocks[i].dev == (uintptr_t)dptr) {
      blocks[i] = blocks[--nblocks];
      pthread_mutex_unlock(&mu);
      free((void *)((uintptr_t)dptr - (uintptr_t)DEVSIM_DISGUISE));
      return 0;
    }
  pthread_mutex_unlock(&mu);
  return -1;
}

void *devsim_real(const void *dptr, size_t bytes) {
  uintptr_t p = (uintptr_t)dptr;
  void *real = NULL;
  pthread_mutex_lock(&mu);
  for (size_t i = 0; i < nblocks; i++) {
    const block_t *b = &blocks[i];
    if (p >= b->dev && p - b->dev <= b->bytes && bytes <= b->bytes - (p - b->dev) &&
        (bytes > 0 || p - b->dev < b->bytes || b->bytes == 0)) {
      real = (void *)(p - (uintptr_t)DEVSIM_DISGUISE);
      break;
    }
  }
  pthread_mutex_unlock(&mu);
  return real;
}

DEVSIM_EXPORT void *devsim_alloc(size_t bytes) { return devsim_alloc_raw(bytes); }

DEVSIM_EXPORT void devsim_free(void *dptr) { (void)devsim_free_raw(dptr); }

DEVSIM_EXPORT long devsim_live_allocations(void) {
  pthread_mutex_lock(&mu);
  long n = (long)nblocks;
  pthread_mutex_unlock(&mu);
  return n;
}

/* Synchronous copies, like cudaMemcpy: not ordered with any stream. */
DEVSIM_EXPORT int devsim_to_device(void *dptr, const void *src, size_t bytes) {
  void *real = devsim_real(dptr, bytes);
  if (!real || (bytes && !src)) return -1;
  if (bytes) memcpy(real, src, bytes);
  return 0;
}

DEVSIM_EXPORT int devsim_to_host(void *dst, const void *dptr, size_t bytes) {
  void *real = devsim_real(dptr, bytes);
  if (!real || (bytes && !dst)) return -1;
  if (bytes) memcpy(dst, real, bytes);
  return 0;
}
