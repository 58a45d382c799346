/*
 * plait transport plugin ABI: the current version, aliased in this one place.
 *
 *   transport_common.h  the types every version shares, and the ABI's rules
 *   transport_v1.h      version 1, frozen (served through the core's adapter)
 *   transport_v2.h      version 2, the current one
 *
 * A plugin includes this header, fills a plait_transport_t and exports it
 * under PLAIT_TRANSPORT_SYMBOL with abi_version PLAIT_TRANSPORT_ABI_VERSION
 * (docs/plugins.md walks through writing one). The loader looks for the
 * newest versioned symbol first, so a plugin exports only its own.
 */
#ifndef PLAIT_TRANSPORT_H
#define PLAIT_TRANSPORT_H

#include "plait/transport_v1.h"
#include "plait/transport_v2.h"

#define PLAIT_TRANSPORT_ABI_VERSION PLAIT_TRANSPORT_V2_ABI_VERSION
#define PLAIT_TRANSPORT_SYMBOL PLAIT_TRANSPORT_SYMBOL_V2
#define PLAIT_TRANSPORT_MIN_SIZE PLAIT_TRANSPORT_V2_MIN_SIZE
#define PLAIT_TRANSPORT_HAS(t, f) PLAIT_TRANSPORT_V2_HAS(t, f)
typedef plait_transport_v2_t plait_transport_t;

#endif /* PLAIT_TRANSPORT_H */
