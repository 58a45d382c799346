/*
 * plaitrun: horovodrun 0.28's flags (docs/plaitrun.md, "horovodrun's flags").
 *
 * `horovodrun -np 2 -H localhost:2 python train.py` works as
 * `plaitrun -np 2 -H localhost:2 python train.py`. Each flag of horovodrun's
 * list (horovod/runner/launch.py) is taken in one of three ways:
 *  - mapped: it sets in the ranks' environment the HOROVOD_* variable
 *    horovodrun would set, with the same value, and removes the PLAIT_*
 *    equivalent, so that the flag wins over the environment as it does under
 *    horovodrun (libplait reads HOROVOD_* where PLAIT_* is unset:
 *    docs/configuration.md); -H/--hostfile give the hosts (ranks on other
 *    hosts start over ssh: remote.h), -p/-i the ssh port and key;
 *  - accepted with no effect, where it cannot change what a plait job does
 *    (--disable-cache, --no-hierarchical-allreduce, ...);
 *  - refused (usage error, exit 2) with the flag and the reason, where plait
 *    cannot do what it asks (--mpi, --autotune-gaussian-process-noise, ...).
 * The elastic flags are elastic/flags.h's.
 */
#ifndef PLAITRUN_HOROVOD_FLAGS_H
#define PLAITRUN_HOROVOD_FLAGS_H

#include <stddef.h>

#include "options.h"

/*
 * If argv[*i] is one of horovodrun's flags (also as --name=value), takes it
 * (and its value, advancing *i past both) into opts and returns 1; returns 0
 * when it is not one (nothing changed); -1 with a one-line message in err when
 * it is refused or its value is bad.
 */
int plaitrun_horovod_flag(int argc, char **argv, int *i, plaitrun_options_t *opts, char *err,
                          size_t err_size);

/* Checks what needs the whole command line (-np against the slots of -H).
 * 0, or -1 with err set. */
int plaitrun_horovod_check(const plaitrun_options_t *opts, char *err, size_t err_size);

/* Applies opts->env to plaitrun's own environment (the ranks inherit it);
 * with opts->verbose says on stderr what each flag set. 0, or -1 with err. */
int plaitrun_horovod_apply_env(const plaitrun_options_t *opts, char *err, size_t err_size);

/* --check-build: what this plait has, in the shape of horovodrun's. */
int plaitrun_print_check_build(void);

#endif
