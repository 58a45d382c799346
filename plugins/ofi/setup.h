/*
 * init and finalize: choosing the provider, opening fabric, domain,
 * completion queue, address vector and an FI_EP_RDM endpoint, and exchanging
 * endpoint names through the core's bootstrap.
 */
#ifndef PLAIT_OFI_SETUP_H
#define PLAIT_OFI_SETUP_H

#include "state.h"

/* On success *out is a started state; on failure err holds the message. */
plait_result_t ofi_start(const plait_transport_init_args_t *args, ofi_state_t **out, char *err,
                         size_t err_len);

/* The transport table's probe: the provider init would choose for args
 * (fi_getinfo only; nothing opened, the bootstrap not used), or why none. */
plait_result_t ofi_probe(const plait_transport_init_args_t *args, char *detail, size_t len);

/* Closes every libfabric object (a broken state's transfers were cancelled
 * and drained first: quiesce.h; a rescued state's are parked, closed at a later init: parked.h);
 * the state stays, with no endpoint. Safe to call twice. */
void ofi_teardown(ofi_state_t *st);

/* ofi_teardown, then frees the state. NULL is harmless. */
void ofi_stop(ofi_state_t *st);

#endif
