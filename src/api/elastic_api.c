/* The public elastic calls (include/plait/elastic.h) over the worker's side
 * of the rendezvous (control/elastic_client.h). */
#include "plait/elastic.h"

#include <stdlib.h>

#include "api/current.h"
#include "control/elastic_client.h"
#include "util/error.h"

PLAIT_API plait_result_t plait_elastic_enabled(int *enabled) {
  REQUIRE_OUT(enabled);
  *enabled = plait_el_driver_valid(getenv("PLAIT_ELASTIC_DRIVER"));
  return PLAIT_SUCCESS;
}

PLAIT_API plait_result_t plait_elastic_epoch(uint64_t *epoch) {
  REQUIRE_OUT(epoch);
  PLAIT_API_ENGINE(e);
  PLAIT_CHECK(plait_api_check(__func__, e));
  *epoch = e->topo.epoch;
  return PLAIT_SUCCESS;
}

PLAIT_API plait_result_t plait_elastic_host_updates(uint64_t *timestamp, unsigned *update) {
  REQUIRE_OUT(timestamp);
  REQUIRE_OUT(update);
  PLAIT_API_ENGINE(e);
  PLAIT_CHECK(plait_api_check(__func__, e));
  *timestamp = 0;
  *update = 0;
  if (!e->topo.epoch) return PLAIT_SUCCESS; /* not elastic */
  plait_result_t rc = plait_el_poll(&e->cfg, e->topo.epoch, e->cfg.timeout_s, timestamp, update);
  return rc ? plait_error_context(rc, "%s", __func__) : PLAIT_SUCCESS;
}

PLAIT_API plait_result_t plait_elastic_removed(int *removed) {
  REQUIRE_OUT(removed);
  *removed = plait_el_removed();
  return PLAIT_SUCCESS;
}
