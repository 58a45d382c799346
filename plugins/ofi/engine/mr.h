/*
 * Memory: registration when the provider's mr_mode asks for it (FI_MR_LOCAL;
 * FI_MR_ENDPOINT binds each registration to the endpoint), or always with
 * PLAIT_OFI_MR=always. Plugin-owned memory (fusion buffers from mem_alloc,
 * scratch) is registered once and cached by address range; other buffers
 * are registered for the length of one collective.
 */
#ifndef PLAIT_OFI_MR_H
#define PLAIT_OFI_MR_H

#include "state.h"

typedef struct ofi_desc {
  void *desc;         /* for fi_tsend / fi_trecv; NULL when none is needed */
  struct fid_mr *tmp; /* a registration made for this call only */
} ofi_desc_t;

/* The descriptor of buf[0..len): from the cache when inside a registered
 * buffer, else a registration for this call (release it). */
plait_result_t ofi_mr_acquire(ofi_state_t *st, const void *buf, size_t len, ofi_desc_t *d);
void ofi_mr_release(ofi_state_t *st, ofi_desc_t *d);

/* Grows a scratch buffer to at least len bytes (registered, cached). */
plait_result_t ofi_scratch_reserve(ofi_state_t *st, ofi_scratch_t *s, size_t len);

/* Closes every cached registration (the memory stays: the core may still
 * hold fusion buffers). Before the domain is closed. */
void ofi_mr_close_all(ofi_state_t *st);
/* Frees the scratch buffers and forgets the cache. */
void ofi_mr_free_all(ofi_state_t *st);

plait_result_t ofi_mem_alloc(ofi_state_t *st, size_t bytes, void **ptr);
plait_result_t ofi_mem_free(ofi_state_t *st, void *ptr);
plait_result_t ofi_mem_copy(ofi_state_t *st, void *dst, const void *src, size_t bytes,
                            plait_copy_kind_t kind);

#endif
