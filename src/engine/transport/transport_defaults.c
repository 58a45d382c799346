/* Per-transport defaults (transport_defaults.h). */
#include "engine/transport/transport_defaults.h"

#include <string.h>

#include "util/log.h"

typedef struct {
  const char *transport;
  uint64_t fusion_max_tensor; /* PLAIT_FUSION_MAX_TENSOR */
} transport_default_t;

/* Only what differs from the configuration table's defaults. */
static const transport_default_t DEFAULTS[] = {
    {"ofi", 1u << 20},
};

uint64_t plait_transport_fusion_piece(const char *transport) {
  /* ofi over shm: 200 x 64 KiB fused in one 12.5 MiB buffer took 6.3-9.6 ms
   * a step, in 1 MiB responses 4.3-7.2 ms (the buffer, the tensors and the
   * peer's reads no longer fit the cache together) */
  return transport && !strcmp(transport, "ofi") ? 1u << 20 : 0;
}

void plait_transport_defaults(plait_config_t *cfg, const char *transport) {
  for (size_t i = 0; transport && i < sizeof DEFAULTS / sizeof DEFAULTS[0]; i++) {
    const transport_default_t *d = &DEFAULTS[i];
    if (strcmp(d->transport, transport)) continue;
    if (!plait_config_given(cfg, "PLAIT_FUSION_MAX_TENSOR") &&
        cfg->fusion_max_tensor != d->fusion_max_tensor) {
      cfg->fusion_max_tensor = d->fusion_max_tensor;
      PLAIT_INFO("config", "PLAIT_FUSION_MAX_TENSOR=%llu: the %s transport's default (set it "
                 "to override)", (unsigned long long)d->fusion_max_tensor, transport);
    }
  }
}
