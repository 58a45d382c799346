/*
 * Internal: the settings each transport runs best with, taken where the user
 * did not set them (docs/configuration.md, "Per-transport defaults"). The
 * plugin declares them in its table's traits (plait_transport_t
 * fusion_piece, fusion_max_tensor); the core never decides by a plugin's
 * name. The ofi plugin's, for one, come from plait-bench fusion over the
 * gradient mixes (bench/mixes): over libfabric a fused copy costs more than
 * the collectives it saves for tensors above about 1 MiB.
 */
#ifndef PLAIT_TRANSPORT_DEFAULTS_H
#define PLAIT_TRANSPORT_DEFAULTS_H

#include "plait/transport.h"
#include "util/config.h"

/* Writes t's preferred values (its fusion_max_tensor trait) into cfg's
 * fields that were not set (plait_config_given); logs what it changed
 * (info). A trait of 0 keeps the table's default. Not thread-safe: called
 * once at start. */
void plait_transport_defaults(plait_config_t *cfg, const plait_transport_t *t);

/* The piece size of t's fused allreduces in host memory (its fusion_piece
 * trait): the fusion buffer takes at most this many bytes of a response at a
 * time, copied in, reduced and copied out while in cache (execute.c); 0: the
 * whole response at once. Not a setting: every rank runs the same
 * transport, so every rank cuts a response into the same pieces. Any
 * thread. */
uint64_t plait_transport_fusion_piece(const plait_transport_t *t);

#endif
