#include "options.h"

#include "plaitrun/elastic/flags.h"
#include "horovod_flags.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

typedef enum opt_id {
  OPT_NP,
  OPT_GRACE,
  OPT_PREFIX,
  OPT_NO_PREFIX,
  OPT_HELP,
  OPT_HELP_ENV,
  OPT_VERSION
} opt_id_t;

typedef enum opt_arg {
  ARG_NONE,     /* a flag: "--name=value" is an error */
  ARG_REQUIRED, /* "--name value" or "--name=value" */
  ARG_OPTIONAL  /* "--name" or "--name=value", never the next argument */
} opt_arg_t;

typedef struct opt_def {
  const char *name;
  opt_id_t id;
  opt_arg_t arg;
} opt_def_t;

static const opt_def_t OPTION_TABLE[] = {
    {"-np", OPT_NP, ARG_REQUIRED},
    {"-n", OPT_NP, ARG_REQUIRED},
    {"--np", OPT_NP, ARG_REQUIRED},
    {"--grace", OPT_GRACE, ARG_REQUIRED},
    {"--prefix", OPT_PREFIX, ARG_OPTIONAL},
    {"--no-prefix", OPT_NO_PREFIX, ARG_NONE},
    {"-h", OPT_HELP, ARG_NONE},
    {"--help", OPT_HELP, ARG_NONE},
    {"--help-env", OPT_HELP_ENV, ARG_NONE},
    {"--num-proc", OPT_NP, ARG_REQUIRED},
    {"--version", OPT_VERSION, ARG_NONE},
};

void plaitrun_print_usage(FILE *out) {
  fputs(
      "Usage: plaitrun -np N [options] [--] command [args...]\n"
      "       plaitrun --min-np N [--max-np M] --host-discovery-script CMD [options]\n"
      "                [--] command [args...]\n"
      "\n"
      "Starts N copies of command on this host (or on the hosts of -H, over ssh)\n"
      "as the ranks of one plait job.\n"
      "Each rank gets PLAIT_RANK, PLAIT_SIZE, PLAIT_LOCAL_RANK, PLAIT_LOCAL_SIZE,\n"
      "PLAIT_RENDEZVOUS (a free 127.0.0.1 port; with other hosts, the first host's)\n"
      "and PLAIT_SECRET (fresh random 64 hex digits) in its environment;\n"
      "PLAIT_RENDEZVOUS and PLAIT_SECRET already set by you are kept. Each output\n"
      "line is prefixed with its rank.\n"
      "\n"
      "Options:\n"
      "  -np N, -n N, --np N  number of ranks to start, 1 to 1024 (required)\n"
      "  --grace SECONDS      when the job is stopped, time the ranks get between\n"
      "                       SIGTERM and SIGKILL (default 2; 0.5 is allowed)\n"
      "  --no-prefix          pass the ranks' output through unchanged\n"
      "  --prefix=0|1         same as --no-prefix (0), or the default (1):\n"
      "                       each line printed as \"[rank]: line\"\n"
      "  --help-env           list every PLAIT_* environment variable with its\n"
      "                       type, default and meaning\n"
      "  --version            print the versions of plaitrun and libplait\n"
      "  -h, --help           print this help\n"
      "  --                   end of options: what follows is the command\n"
      "Options that take a value also accept --name=value.\n"
      "\n"
      "horovodrun's flags are taken too: -H/--hosts and --hostfile (other hosts\n"
      "over ssh; PLAITRUN_SSH is the ssh command, default 'ssh'), -p, -i,\n"
      "--fusion-threshold-mb, --cycle-time-ms, --cache-capacity, --autotune,\n"
      "--timeline-filename, --log-level, --start-timeout, --no-stall-check,\n"
      "--gloo, --output-filename DIR, --verbose, -cb/--check-build, ...; the ones\n"
      "plait cannot honour (--mpi, ...) are refused with the reason. See\n"
      "docs/plaitrun.md for the full list.\n"
      "\n"
      "Elastic mode (docs/plaitrun.md, \"Elastic mode\"): with --min-np, --max-np or\n"
      "--host-discovery-script, plaitrun is an elastic driver: it starts workers on\n"
      "the hosts' slots and forms a new job (epoch) when workers fail or hosts come\n"
      "and go, with the survivors and the new ones.\n"
      "  --min-np N           the fewest workers a job runs with (default -np)\n"
      "  --max-np N           the most workers (default: no cap but the slots)\n"
      "  -np N                slots to wait for before starting (default --min-np)\n"
      "  --host-discovery-script CMD\n"
      "                       run every second; prints host or host:slots lines\n"
      "                       (else -H/--hostfile is the fixed host list)\n"
      "  --slots-per-host N   slots of a host printed without :slots (default 1)\n"
      "  --elastic-timeout S  how long to wait for --min-np workers (default 600)\n"
      "  --reset-limit N      end the job when it would re-form more than N times\n"
      "  --blacklist-cooldown-range MIN MAX\n"
      "                       a failing host comes back after MIN..MAX seconds\n"
      "                       (exponential back-off); without it, never\n"
      "\n"
      "When a rank exits non-zero or is killed, the other ranks get SIGTERM and,\n"
      "after the grace time, SIGKILL. SIGINT, SIGTERM, SIGHUP and SIGQUIT sent\n"
      "to plaitrun are forwarded to every rank (a second one kills them at once).\n"
      "\n"
      "Exit status: 0 when every rank exits 0; else the status of the first rank\n"
      "that failed (128+S when killed by signal S); 127 when the command is not\n"
      "found, 126 when it cannot be executed; 128+S when plaitrun itself got\n"
      "signal S (130 for SIGINT, 143 for SIGTERM); 2 for a usage error; 1 when\n"
      "plaitrun itself fails.\n"
      "\n"
      "To start ranks with mpirun, srun or torchrun instead, see docs/plaitrun.md.\n",
      out);
}

void plaitrun_set_err(char *err, size_t err_size, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(err, err_size, fmt, ap);
  va_end(ap);
}

int plaitrun_parse_whole(const char *text, long lo, long hi, int *out) {
  if (text[0] < '0' || text[0] > '9') return -1;
  errno = 0;
  char *end = NULL;
  long v = strtol(text, &end, 10);
  if (errno != 0 || *end != '\0' || v < lo || v > hi) return -1;
  *out = (int)v;
  return 0;
}

/* Non-negative decimal number of seconds, at most hi. */
static int parse_seconds(const char *text, double hi, double *out) {
  if ((text[0] < '0' || text[0] > '9') && text[0] != '.') return -1;
  errno = 0;
  char *end = NULL;
  double v = strtod(text, &end);
  if (errno != 0 || *end != '\0' || !isfinite(v) || v < 0 || v > hi) return -1;
  *out = v;
  return 0;
}

static const opt_def_t *find_option(const char *arg, size_t name_len) {
  size_t count = sizeof OPTION_TABLE / sizeof OPTION_TABLE[0];
  for (size_t i = 0; i < count; i++) {
    const char *name = OPTION_TABLE[i].name;
    if (strlen(name) == name_len && strncmp(name, arg, name_len) == 0)
      return &OPTION_TABLE[i];
  }
  return NULL;
}

/* Applies one option with its value (NULL when none). */
static int apply_option(const opt_def_t *def, const char *name, const char *value,
                        plaitrun_options_t *opts, char *err, size_t err_size) {
  switch (def->id) {
  case OPT_NP:
    if (opts->nranks != 0) {
      plaitrun_set_err(err, err_size, "the number of ranks is given twice (%s %s)", name, value);
      return -1;
    }
    if (plaitrun_parse_whole(value, 1, PLAITRUN_MAX_RANKS, &opts->nranks) != 0) {
      plaitrun_set_err(err, err_size, "%s '%s': expected a whole number of ranks from 1 to %d",
                       name, value, PLAITRUN_MAX_RANKS);
      return -1;
    }
    return 0;
  case OPT_GRACE:
    if (parse_seconds(value, PLAITRUN_MAX_GRACE_S, &opts->grace_s) != 0) {
      plaitrun_set_err(err, err_size, "%s '%s': expected a number of seconds from 0 to %.0f "
                       "(e.g. 2 or 0.5)", name, value, PLAITRUN_MAX_GRACE_S);
      return -1;
    }
    return 0;
  case OPT_PREFIX:
    if (value == NULL || strcmp(value, "1") == 0) {
      opts->prefix = 1;
    } else if (strcmp(value, "0") == 0) {
      opts->prefix = 0;
    } else {
      plaitrun_set_err(err, err_size, "%s='%s': expected 0 or 1", name, value);
      return -1;
    }
    return 0;
  case OPT_NO_PREFIX:
    opts->prefix = 0;
    return 0;
  case OPT_HELP:
    opts->action = PLAITRUN_ACTION_HELP;
    return 0;
  case OPT_HELP_ENV:
    opts->action = PLAITRUN_ACTION_HELP_ENV;
    return 0;
  case OPT_VERSION:
    opts->action = PLAITRUN_ACTION_VERSION;
    return 0;
  }
  return 0;
}

/*
 * Parses the option at argv[*i] and advances *i past it (and its value).
 * Returns 0, or -1 with err set.
 */
static int parse_one(int argc, char **argv, int *i, plaitrun_options_t *opts,
                     char *err, size_t err_size) {
  const char *arg = argv[*i];
  const char *eq = strchr(arg, '=');
  size_t name_len = eq ? (size_t)(eq - arg) : strlen(arg);
  const opt_def_t *def = find_option(arg, name_len);
  if (def == NULL) {
    int taken = plaitrun_elastic_flag(argc, argv, i, opts, err, err_size);
    if (taken == 0) taken = plaitrun_horovod_flag(argc, argv, i, opts, err, err_size);
    if (taken != 0) return taken < 0 ? -1 : 0;
    plaitrun_set_err(err, err_size, "unknown option '%s'", arg);
    return -1;
  }
  const char *value = eq ? eq + 1 : NULL;
  if (def->arg == ARG_NONE && value != NULL) {
    plaitrun_set_err(err, err_size, "option '%s' takes no value", def->name);
    return -1;
  }
  if (def->arg == ARG_REQUIRED && value == NULL) {
    if (*i + 1 >= argc) {
      plaitrun_set_err(err, err_size, "option '%s' needs a value", def->name);
      return -1;
    }
    *i += 1;
    value = argv[*i];
  }
  *i += 1;
  return apply_option(def, def->name, value, opts, err, err_size);
}

int plaitrun_parse_args(int argc, char **argv, plaitrun_options_t *opts,
                        char *err, size_t err_size) {
  memset(opts, 0, sizeof *opts);
  opts->action = PLAITRUN_ACTION_RUN;
  opts->grace_s = PLAITRUN_DEFAULT_GRACE_S;
  opts->prefix = 1;
  plaitrun_elastic_defaults(opts);
  int i = 1;
  while (i < argc) {
    const char *arg = argv[i];
    if (strcmp(arg, "--") == 0) {
      i++;
      break;
    }
    if (arg[0] != '-' || arg[1] == '\0') break; /* the command starts here */
    if (parse_one(argc, argv, &i, opts, err, err_size) != 0) return -1;
    if (opts->action != PLAITRUN_ACTION_RUN) return 0;
  }
  if (opts->nranks == 0 && !opts->elastic) {
    plaitrun_set_err(err, err_size, "missing -np N: how many ranks to start (1 to %d)",
                     PLAITRUN_MAX_RANKS);
    return -1;
  }
  if (i >= argc) {
    plaitrun_set_err(err, err_size, "missing the command to run after the options");
    return -1;
  }
  opts->command = &argv[i];
  if (plaitrun_elastic_check(opts, err, err_size) != 0) return -1;
  return plaitrun_horovod_check(opts, err, err_size);
}
