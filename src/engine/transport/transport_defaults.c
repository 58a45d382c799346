/* Per-transport defaults (transport_defaults.h): the plugin's traits. */
#include "engine/transport/transport_defaults.h"

#include "util/log.h"

uint64_t plait_transport_fusion_piece(const plait_transport_t *t) {
  return t ? t->fusion_piece : 0;
}

void plait_transport_defaults(plait_config_t *cfg, const plait_transport_t *t) {
  if (!t || !t->fusion_max_tensor) return;
  if (!plait_config_given(cfg, "PLAIT_FUSION_MAX_TENSOR") &&
      cfg->fusion_max_tensor != t->fusion_max_tensor) {
    cfg->fusion_max_tensor = t->fusion_max_tensor;
    PLAIT_INFO("config", "PLAIT_FUSION_MAX_TENSOR=%llu: the %s transport's default (set it "
               "to override)", (unsigned long long)t->fusion_max_tensor, t->name);
  }
}
