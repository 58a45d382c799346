/* Internal (api layer): what plait_init asks of process_set_api.c. */
#ifndef PLAIT_API_PROCESS_SET_API_H
#define PLAIT_API_PROCESS_SET_API_H

#include "engine/engine.h"

/* Adds the sets of PLAIT_PROCESS_SETS on e (after its coordinator started),
 * waiting up to timeout_s for each; PLAIT_ERR_CONFIG for a malformed value,
 * PLAIT_ERR_MISMATCH when ranks list different sets, PLAIT_ERR_TIMEOUT when
 * the other ranks never add it. */
plait_result_t plait_process_sets_from_config(plait_engine_t *e, const char *spec,
                                              double timeout_s);

#endif
