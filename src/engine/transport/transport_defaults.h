/*
 * Internal: the settings each transport runs best with, taken where the user
 * did not set them (docs/configuration.md, "Per-transport defaults"). Chosen
 * from plait-bench fusion over the gradient mixes (bench/mixes): over
 * libfabric (ofi) a fused copy costs more than the collectives it saves for
 * tensors above about 1 MiB, so those are reduced alone; over Gloo fusion
 * pays for the 2-9 MiB layers too, so the table's defaults stand.
 */
#ifndef PLAIT_TRANSPORT_DEFAULTS_H
#define PLAIT_TRANSPORT_DEFAULTS_H

#include "util/config.h"

/* Writes transport's preferred values into cfg's fields that were not set
 * (plait_config_given); logs what it changed (info). Unknown transports keep
 * the table's defaults. Not thread-safe: called once at start. */
void plait_transport_defaults(plait_config_t *cfg, const char *transport);

/* The piece size of transport's fused allreduces in host memory: the fusion
 * buffer takes at most this many bytes of a response at a time, copied in,
 * reduced and copied out while in cache (execute.c); 0: the whole response
 * at once. Not a setting: every rank runs the same transport, so every rank
 * cuts a response into the same pieces. Any thread. */
uint64_t plait_transport_fusion_piece(const char *transport);

#endif
