/*
 * plaitrun: horovodrun's elastic flags (docs/plaitrun.md, "Elastic mode").
 *
 * plaitrun becomes the elastic driver (driver.h) when --min-np, --max-np or
 * --host-discovery-script is given, as horovodrun does. The other elastic
 * flags (--slots-per-host, --elastic-timeout, --reset-limit,
 * --blacklist-cooldown-range) need elastic mode; alone they are a usage error.
 */
#ifndef PLAITRUN_ELASTIC_FLAGS_H
#define PLAITRUN_ELASTIC_FLAGS_H

#include <stddef.h>

#include "../options.h"

#define PLAITRUN_ELASTIC_TIMEOUT_DEFAULT_S 600 /* horovodrun's ELASTIC_TIMEOUT_SECS */
#define PLAITRUN_COOLDOWN_LOWEST_S 1           /* Horovod's bounds of the cooldown range */
#define PLAITRUN_COOLDOWN_HIGHEST_S 3600

/* Sets the elastic fields of opts to their defaults (not elastic). */
void plaitrun_elastic_defaults(plaitrun_options_t *opts);

/*
 * If argv[*i] is an elastic flag (also --name=value), takes it and its value
 * (two for --blacklist-cooldown-range), advancing *i past them, and returns
 * 1; 0 when it is not one; -1 with a one-line message naming the flag in err
 * when its value is bad.
 */
int plaitrun_elastic_flag(int argc, char **argv, int *i, plaitrun_options_t *opts, char *err,
                          size_t err_size);

/* What needs the whole command line: elastic flags without elastic mode,
 * -np/--min-np/--max-np in order, hosts to run on. 0, or -1 with err. */
int plaitrun_elastic_check(plaitrun_options_t *opts, char *err, size_t err_size);

#endif
