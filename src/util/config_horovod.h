/*
 * Internal: Horovod 0.28's environment variables, honoured where plait has an
 * equivalent (docs/configuration.md, "Horovod's variables").
 *
 * A HOROVOD_* variable fills its PLAIT_* equivalent when that one is not set,
 * read in Horovod's units and with Horovod's parsing (strtol/strtof: "8M"
 * reads as 8, "true" as 0, as Horovod reads them; plait then warns). PLAIT_*
 * always wins. A Horovod variable plait has no equivalent for is reported by
 * name; harmless ones (set by horovodrun for its own Gloo/MPI wiring, or
 * build-time ones) are not.
 */
#ifndef PLAIT_CONFIG_HOROVOD_H
#define PLAIT_CONFIG_HOROVOD_H

#include <stddef.h>

#include "util/config.h"

/* Called by plait_config_load after the PLAIT_* variables: fills cfg from the
 * Horovod variables. PLAIT_ERR_CONFIG naming the variable, its value and what
 * it accepts when a Horovod value has no sensible reading (a negative size, a
 * rank that is not a number, a rendezvous address without its port). Logs
 * nothing. */
plait_result_t plait_config_horovod_apply(plait_config_t *cfg);

/* Called once by plait_init when the rank is known: logs what was taken (info),
 * what was ignored because PLAIT_* is set, what has no equivalent and what
 * Horovod itself would have misread (warn). A timeline path taken from
 * HOROVOD_TIMELINE without "%r" is written by rank 0 only, as Horovod writes
 * its one timeline on the coordinator: other ranks' cfg->timeline is cleared. */
void plait_config_horovod_settle(plait_config_t *cfg, int rank);

/* The notes as text, one "# ..." line each (empty when no Horovod variable is
 * set): what plait_config_dump appends. Returns the length it needs (without
 * the terminator); writes at most buf_size bytes, terminated. */
size_t plait_config_horovod_notes(char *buf, size_t buf_size);

/* The Horovod variable that gave var (a PLAIT_* name) its value, or NULL. */
const char *plait_config_horovod_origin(const char *var);

/* Horovod's strtol/strtof reading of text, exposed for tests: *clean is 1
 * when the whole text was the number (as plait would accept it). */
long long plait_horovod_strtol(const char *text, int *clean);
double plait_horovod_strtof(const char *text, int *clean);

#endif
