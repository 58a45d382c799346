/*
 * plaitrun: the command line.
 *
 * plaitrun [options] [--] command [args...]; the first argument that does not
 * start with '-' (or everything after "--") is the command. Options that take
 * a value accept it as the next argument or after '=' (--np=4, --grace=0.5).
 */
#ifndef PLAITRUN_OPTIONS_H
#define PLAITRUN_OPTIONS_H

#include <stddef.h>
#include <stdio.h>

#define PLAITRUN_MAX_RANKS 1024
#define PLAITRUN_DEFAULT_GRACE_S 2.0
#define PLAITRUN_MAX_GRACE_S 86400.0

/* Exit status of plaitrun for a usage error (as for most Unix tools). */
#define PLAITRUN_EXIT_USAGE 2
/* Exit status when plaitrun itself fails (cannot fork, too many ranks for the
 * file-descriptor limit, ...). */
#define PLAITRUN_EXIT_INTERNAL 1

typedef enum plaitrun_action {
  PLAITRUN_ACTION_RUN,
  PLAITRUN_ACTION_HELP,
  PLAITRUN_ACTION_HELP_ENV,
  PLAITRUN_ACTION_VERSION,
  PLAITRUN_ACTION_CHECK_BUILD
} plaitrun_action_t;

/* A variable plaitrun sets (or unsets) in the ranks' environment because of a
 * horovodrun flag (horovod_flags.h). */
#define PLAITRUN_MAX_ENV 48
typedef struct plaitrun_env {
  char name[64];
  char value[1024];
  int unset; /* 1: remove name from the environment */
  const char *flag; /* the flag that asked for it */
} plaitrun_env_t;

/* A host of -H / --hostfile, in the order given: ranks fill each host's
 * slots before the next host's, as under horovodrun. */
#define PLAITRUN_MAX_HOSTS 256
#define PLAITRUN_HOST_NAME_MAX 256
typedef struct plaitrun_host {
  char name[PLAITRUN_HOST_NAME_MAX];
  int slots;
  int local; /* 1: this host (localhost, 127.*, ::1, its name): no ssh */
} plaitrun_host_t;

typedef struct plaitrun_options {
  plaitrun_action_t action;
  int nranks;     /* 1..PLAITRUN_MAX_RANKS; 0 when -np was not given */
  double grace_s; /* SIGTERM -> SIGKILL delay when stopping the job */
  int prefix;     /* 1: prefix each output line with "[rank]: " */
  char **command; /* NULL-terminated, points into argv; NULL when absent */
  /* horovodrun's flags (horovod_flags.c) */
  int slots;               /* total slots of -H / --hostfile; 0 when not given */
  int verbose;             /* --verbose: say what each flag set */
  const char *output_dir;  /* --output-filename: <dir>/rank.<r>/stdout|stderr */
  int n_hosts;             /* hosts of -H / --hostfile; 0: every rank on this host */
  int remote;              /* 1: some host is another one (ranks started over ssh) */
  plaitrun_host_t hosts[PLAITRUN_MAX_HOSTS];
  const char *ssh_port;     /* -p / --ssh-port; NULL: ssh's default */
  const char *ssh_identity; /* -i / --ssh-identity-file; NULL: ssh's default */
  int n_env;
  plaitrun_env_t env[PLAITRUN_MAX_ENV];
  /* elastic mode (elastic/flags.c): on when --min-np, --max-np or
   * --host-discovery-script is given */
  int elastic;
  int min_np, max_np;            /* 0 when not given (max: no cap but the slots) */
  const char *discovery_script;  /* --host-discovery-script; NULL: the hosts of -H */
  int slots_per_host;            /* slots of a discovered host without ":slots"; 0: not given */
  int elastic_timeout_s;         /* --elastic-timeout, default 600 */
  int reset_limit;               /* --reset-limit; -1: none */
  int cooldown_min_s, cooldown_max_s; /* --blacklist-cooldown-range; 0 0: none */
  const char *elastic_only_flag; /* an elastic flag seen (for the error without elastic mode) */
} plaitrun_options_t;

/*
 * Parses argv into *opts. Returns 0 on success. On a usage error returns -1
 * and writes a one-line message (without "plaitrun: " and without newline)
 * that names the offending argument into err. --help, --help-env and
 * --version end parsing at once and set opts->action.
 */
int plaitrun_parse_args(int argc, char **argv, plaitrun_options_t *opts,
                        char *err, size_t err_size);

/* The text of --help. */
void plaitrun_print_usage(FILE *out);

/* What the flag parsers share (options.c, horovod_flags.c, elastic/flags.c):
 * a message into err, and a whole decimal number in [lo, hi], digits only
 * (0, or -1). */
void plaitrun_set_err(char *err, size_t err_size, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
int plaitrun_parse_whole(const char *text, long lo, long hi, int *out);

#endif
