/* Per-transport defaults (transport_defaults.h). */
#include "engine/transport_defaults.h"

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
