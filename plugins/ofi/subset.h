/* subset(): a state over some ranks of a parent state (transport.h). */
#ifndef PLAIT_OFI_SUBSET_H
#define PLAIT_OFI_SUBSET_H

#include "state.h"

/* *out: the new state on a member, NULL elsewhere. No communication. */
plait_result_t ofi_subset(ofi_state_t *parent, const int *ranks, int n, ofi_state_t **out);

#endif
