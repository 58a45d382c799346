#include "horovod_flags.h"

#include "hostnames.h"

#include <plait/plait.h>

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

typedef enum {
  H_ENV,         /* sets var to the (checked) value */
  H_NOOP,        /* accepted, no effect; why says so */
  H_REFUSE,      /* usage error naming the flag; why says why */
  H_HOSTS,       /* -H host:slots,... */
  H_HOSTFILE,    /* lines "host slots=N" */
  H_VERBOSE,
  H_OUTPUT,      /* --output-filename DIR */
  H_SSH_PORT,    /* -p PORT for ssh */
  H_SSH_IDENTITY, /* -i FILE for ssh */
  H_CHECK_BUILD,
  H_VERSION
} how_t;

typedef enum {
  V_NONE,    /* a switch: value is the fixed text */
  V_INT,     /* whole number >= 0 */
  V_INT_POS, /* whole number > 0 */
  V_MB,      /* whole number of MiB >= 0, set as bytes */
  V_FLOAT,   /* number >= 0 */
  V_TEXT,
  V_LEVEL,   /* horovodrun's --log-level choices */
  V_ANY      /* a value that is taken and dropped */
} val_t;

typedef struct {
  const char *names[3]; /* the flag's spellings */
  how_t how;
  val_t val;
  const char *var;      /* H_ENV: the variable horovodrun sets */
  const char *fixed;    /* H_ENV with V_NONE: its value */
  const char *unset[2]; /* H_ENV: PLAIT_* equivalents the flag overrides */
  const char *why;      /* H_NOOP / H_REFUSE */
} hflag_t;

#define ONE_HOST_WHY "ranks choose their addresses themselves"

static const hflag_t FLAGS[] = {
    {{"-v"}, H_VERSION, V_NONE, 0, 0, {0}, 0},
    {{"-cb", "--check-build"}, H_CHECK_BUILD, V_NONE, 0, 0, {0}, 0},
    {{"--verbose"}, H_VERBOSE, V_NONE, 0, 0, {0}, 0},
    {{"-H", "--hosts", "-hosts"}, H_HOSTS, V_TEXT, 0, 0, {0}, 0},
    {{"-hostfile", "--hostfile"}, H_HOSTFILE, V_TEXT, 0, 0, {0}, 0},
    {{"--output-filename"}, H_OUTPUT, V_TEXT, 0, 0, {0}, 0},
    /* tunable parameters */
    {{"--fusion-threshold-mb"}, H_ENV, V_MB, "HOROVOD_FUSION_THRESHOLD", 0,
     {"PLAIT_FUSION_THRESHOLD"}, 0},
    {{"--cycle-time-ms"}, H_ENV, V_FLOAT, "HOROVOD_CYCLE_TIME", 0, {"PLAIT_CYCLE_TIME_MS"}, 0},
    {{"--cache-capacity"}, H_ENV, V_INT, "HOROVOD_CACHE_CAPACITY", 0, {"PLAIT_CACHE_CAPACITY"}, 0},
    {{"--hierarchical-allreduce"}, H_ENV, V_NONE, "HOROVOD_HIERARCHICAL_ALLREDUCE", "1",
     {"PLAIT_HIERARCHICAL_ALLREDUCE"}, 0},
    {{"--hierarchical-allgather"}, H_ENV, V_NONE, "HOROVOD_HIERARCHICAL_ALLGATHER", "1",
     {"PLAIT_HIERARCHICAL_ALLGATHER"}, 0},
    {{"--no-hierarchical-allreduce"}, H_ENV, V_NONE, "HOROVOD_HIERARCHICAL_ALLREDUCE", "0",
     {"PLAIT_HIERARCHICAL_ALLREDUCE"}, 0},
    {{"--no-hierarchical-allgather"}, H_ENV, V_NONE, "HOROVOD_HIERARCHICAL_ALLGATHER", "0",
     {"PLAIT_HIERARCHICAL_ALLGATHER"}, 0},
    /* autotuning */
    {{"--autotune"}, H_ENV, V_NONE, "HOROVOD_AUTOTUNE", "1", {"PLAIT_AUTOTUNE"}, 0},
    {{"--no-autotune"}, H_ENV, V_NONE, "HOROVOD_AUTOTUNE", "0", {"PLAIT_AUTOTUNE"}, 0},
    {{"--autotune-log-file"}, H_ENV, V_TEXT, "HOROVOD_AUTOTUNE_LOG", 0, {"PLAIT_AUTOTUNE_LOG"}, 0},
    {{"--autotune-warmup-samples"}, H_ENV, V_INT, "HOROVOD_AUTOTUNE_WARMUP_SAMPLES", 0,
     {"PLAIT_AUTOTUNE_WARMUP_SAMPLES"}, 0},
    {{"--autotune-steps-per-sample"}, H_ENV, V_INT_POS, "HOROVOD_AUTOTUNE_STEPS_PER_SAMPLE", 0,
     {"PLAIT_AUTOTUNE_STEPS_PER_SAMPLE"}, 0},
    {{"--autotune-bayes-opt-max-samples"}, H_ENV, V_INT_POS,
     "HOROVOD_AUTOTUNE_BAYES_OPT_MAX_SAMPLES", 0, {"PLAIT_AUTOTUNE_MAX_SAMPLES"}, 0},
    {{"--autotune-gaussian-process-noise"}, H_REFUSE, V_ANY, 0, 0, {0},
     "plait's autotuner searches a grid by coordinate descent with medians of repeated "
     "samples; it has no Gaussian process (leave the flag out)"},
    /* timeline */
    {{"--timeline-filename"}, H_ENV, V_TEXT, "HOROVOD_TIMELINE", 0, {"PLAIT_TIMELINE"}, 0},
    {{"--timeline-mark-cycles"}, H_ENV, V_NONE, "HOROVOD_TIMELINE_MARK_CYCLES", "1", {0}, 0},
    {{"--no-timeline-mark-cycles"}, H_ENV, V_NONE, "HOROVOD_TIMELINE_MARK_CYCLES", "0", {0}, 0},
    /* stall check */
    {{"--no-stall-check"}, H_ENV, V_NONE, "HOROVOD_STALL_CHECK_DISABLE", "1",
     {"PLAIT_STALL_WARN_S", "PLAIT_STALL_ABORT_S"}, 0},
    {{"--stall-check"}, H_ENV, V_NONE, "HOROVOD_STALL_CHECK_DISABLE", "0", {0}, 0},
    {{"--stall-check-warning-time-seconds"}, H_ENV, V_INT, "HOROVOD_STALL_CHECK_TIME_SECONDS", 0,
     {"PLAIT_STALL_WARN_S"}, 0},
    {{"--stall-check-shutdown-time-seconds"}, H_ENV, V_INT, "HOROVOD_STALL_SHUTDOWN_TIME_SECONDS",
     0, {"PLAIT_STALL_ABORT_S"}, 0},
    /* library */
    {{"--mpi-threads-disable"}, H_NOOP, V_NONE, 0, 0, {0}, "plait does not use MPI"},
    {{"--no-mpi-threads-disable"}, H_NOOP, V_NONE, 0, 0, {0}, "plait does not use MPI"},
    {{"--mpi-args"}, H_REFUSE, V_ANY, 0, 0, {0},
     "plaitrun does not start ranks with mpirun; run mpirun yourself (docs/plaitrun.md)"},
    {{"--binding-args"}, H_REFUSE, V_ANY, 0, 0, {0},
     "plaitrun does not bind ranks to cores; use taskset or mpirun's binding"},
    {{"--tcp"}, H_NOOP, V_NONE, 0, 0, {0},
     "plait's gloo transport runs over TCP already (with PLAIT_TRANSPORT=ofi, FI_PROVIDER=tcp)"},
    {{"--num-nccl-streams"}, H_REFUSE, V_ANY, 0, 0, {0}, "plait's nccl plugin runs one stream per device; the count is not settable"},
    {{"--thread-affinity"}, H_ENV, V_TEXT, "HOROVOD_THREAD_AFFINITY", 0,
     {"PLAIT_THREAD_AFFINITY"}, 0},
    {{"--gloo-timeout-seconds"}, H_ENV, V_INT_POS, "HOROVOD_GLOO_TIMEOUT_SECONDS", 0,
     {"PLAIT_TIMEOUT_S"}, 0},
    /* logging */
    {{"--log-level"}, H_ENV, V_LEVEL, "HOROVOD_LOG_LEVEL", 0, {"PLAIT_LOG_LEVEL"}, 0},
    {{"--log-with-timestamp", "--no-log-hide-timestamp"}, H_NOOP, V_NONE, 0, 0, {0},
     "plait's log lines have one fixed form"},
    {{"--log-without-timestamp", "--log-hide-timestamp"}, H_NOOP, V_NONE, 0, 0, {0},
     "plait's log lines have one fixed form"},
    {{"-prefix-timestamp", "--prefix-output-with-timestamp"}, H_REFUSE, V_NONE, 0, 0, {0},
     "plaitrun prefixes lines with the rank only (not supported yet)"},
    /* start-up, network, ssh */
    {{"--start-timeout"}, H_ENV, V_INT_POS, "HOROVOD_START_TIMEOUT", 0, {"PLAIT_START_TIMEOUT_S"},
     0},
    {{"--network-interfaces", "--network-interface"}, H_NOOP, V_ANY, 0, 0, {0},
     "rank 0 listens on the address of PLAIT_RENDEZVOUS (the first host's name), which "
     "chooses the interface"},
    {{"--disable-cache"}, H_NOOP, V_NONE, 0, 0, {0},
     "plaitrun keeps no cache of host checks (it makes none)"},
    {{"-p", "--ssh-port"}, H_SSH_PORT, V_INT_POS, 0, 0, {0}, 0},
    {{"-i", "--ssh-identity-file"}, H_SSH_IDENTITY, V_TEXT, 0, 0, {0}, 0},
    {{"--config-file"}, H_REFUSE, V_ANY, 0, 0, {0},
     "YAML configuration files are not read; give the flags, or HOROVOD_*/PLAIT_* variables"},
    /* controllers */
    {{"--gloo"}, H_ENV, V_NONE, "PLAIT_TRANSPORT", "gloo", {0}, 0},
    {{"--mpi"}, H_REFUSE, V_NONE, 0, 0, {0},
     "plait does not use MPI: ranks coordinate over plait's own control plane and run "
     "collectives over PLAIT_TRANSPORT (auto by default: libfabric or Gloo); to start ranks "
     "with mpirun, run mpirun yourself (docs/plaitrun.md)"},
    {{"--jsrun"}, H_REFUSE, V_NONE, 0, 0, {0},
     "plaitrun does not start ranks with jsrun; run jsrun yourself"},
};
#define N_FLAGS (sizeof FLAGS / sizeof FLAGS[0])

static const hflag_t *find(const char *arg, size_t len) {
  for (size_t f = 0; f < N_FLAGS; f++)
    for (int k = 0; k < 3 && FLAGS[f].names[k]; k++)
      if (strlen(FLAGS[f].names[k]) == len && !strncmp(FLAGS[f].names[k], arg, len))
        return &FLAGS[f];
  return NULL;
}

static int add_env(plaitrun_options_t *o, const char *flag, const char *name, const char *value,
                   int unset, char *err, size_t err_size) {
  for (int k = 0; k < o->n_env; k++) /* a later flag replaces an earlier one */
    if (!strcmp(o->env[k].name, name)) {
      snprintf(o->env[k].value, sizeof o->env[k].value, "%s", value ? value : "");
      o->env[k].unset = unset;
      o->env[k].flag = flag;
      return 0;
    }
  if (o->n_env >= PLAITRUN_MAX_ENV || strlen(value ? value : "") >= sizeof o->env[0].value) {
    plaitrun_set_err(err, err_size, "%s: too many or too long settings", flag);
    return -1;
  }
  plaitrun_env_t *e = &o->env[o->n_env++];
  snprintf(e->name, sizeof e->name, "%s", name);
  snprintf(e->value, sizeof e->value, "%s", value ? value : "");
  e->unset = unset;
  e->flag = flag;
  return 0;
}

static int parse_whole(const char *v, long long lo, long long *out) {
  if (!isdigit((unsigned char)v[0])) return -1;
  char *end;
  errno = 0;
  long long x = strtoll(v, &end, 10);
  if (errno || *end || x < lo || x > (1LL << 40)) return -1;
  *out = x;
  return 0;
}

/* Checks the value as horovodrun's argparse and validate_config_args do, and
 * writes the text horovodrun would put in the variable. */
static int check_value(const hflag_t *h, const char *flag, const char *v, char *out, size_t cap,
                       char *err, size_t err_size) {
  long long ll;
  char *end;
  double d;
  switch (h->val) {
  case V_NONE: snprintf(out, cap, "%s", h->fixed); return 0;
  case V_INT:
  case V_INT_POS:
    if (parse_whole(v, h->val == V_INT_POS ? 1 : 0, &ll)) break;
    snprintf(out, cap, "%lld", ll);
    return 0;
  case V_MB:
    if (parse_whole(v, 0, &ll) || ll > (1LL << 30)) break;
    snprintf(out, cap, "%lld", ll * 1024 * 1024);
    return 0;
  case V_FLOAT:
    errno = 0;
    d = strtod(v, &end);
    if (!*v || isspace((unsigned char)*v) || errno || *end || !isfinite(d) || d < 0 || d > 1e9)
      break;
    snprintf(out, cap, "%s", v);
    return 0;
  case V_LEVEL: {
    static const char *levels[] = {"TRACE", "DEBUG", "INFO", "WARNING", "ERROR", "FATAL"};
    for (int k = 0; k < 6; k++)
      if (!strcasecmp(v, levels[k])) {
        snprintf(out, cap, "%s", levels[k]);
        return 0;
      }
    plaitrun_set_err(err, err_size,
                     "%s '%s': expected one of TRACE, DEBUG, INFO, WARNING, ERROR, FATAL",
                     flag, v);
    return -1;
  }
  case V_TEXT:
  case V_ANY:
    if (!*v) {
      plaitrun_set_err(err, err_size, "%s: the value is empty", flag);
      return -1;
    }
    snprintf(out, cap, "%s", v);
    return 0;
  }
  plaitrun_set_err(err, err_size, "%s '%s': expected %s", flag, v,
                   h->val == V_FLOAT ? "a number of milliseconds >= 0 (e.g. 1 or 2.5)"
                   : h->val == V_MB  ? "a whole number of MiB >= 0 (0 disables fusion)"
                   : h->val == V_INT_POS ? "a whole number of seconds > 0"
                   : "a whole number >= 0");
  return -1;
}

/* One "host:slots" (or "host slots=N" from a host file, already rewritten). */
static int take_host(const char *flag, const char *host, const char *slots_text,
                     plaitrun_options_t *o, char *err, size_t err_size) {
  long long slots;
  if (!slots_text || parse_whole(slots_text, 1, &slots) || slots > PLAITRUN_MAX_RANKS) {
    plaitrun_set_err(err, err_size,
                     "%s: '%s' has no slot count from 1 to %d (expected host:slots, e.g. "
                     "localhost:2)", flag, host, PLAITRUN_MAX_RANKS);
    return -1;
  }
  if (!plaitrun_valid_host_name(host)) {
    plaitrun_set_err(err, err_size,
                     "%s: '%s' is not a host name (letters, digits, '.', '-', '_', ':'; "
                     "not starting with '-')", flag, host);
    return -1;
  }
  if (o->n_hosts >= PLAITRUN_MAX_HOSTS) {
    plaitrun_set_err(err, err_size, "%s: more than %d hosts", flag, PLAITRUN_MAX_HOSTS);
    return -1;
  }
  plaitrun_host_t *h = &o->hosts[o->n_hosts++];
  snprintf(h->name, sizeof h->name, "%s", host);
  h->slots = (int)slots;
  h->local = plaitrun_is_this_host(host);
  if (!h->local) o->remote = 1;
  if (o->slots + slots > PLAITRUN_MAX_RANKS) {
    plaitrun_set_err(err, err_size, "%s: more than %d slots in all", flag, PLAITRUN_MAX_RANKS);
    return -1;
  }
  o->slots += (int)slots;
  return 0;
}

static int take_hosts(const char *flag, const char *list, plaitrun_options_t *o, char *err,
                      size_t err_size) {
  char copy[4096];
  if (snprintf(copy, sizeof copy, "%s", list) >= (int)sizeof copy) {
    plaitrun_set_err(err, err_size, "%s: the host list is too long", flag);
    return -1;
  }
  o->slots = 0;
  o->n_hosts = 0;
  o->remote = 0;
  char *save = NULL;
  int n = 0;
  for (char *item = strtok_r(copy, ",", &save); item; item = strtok_r(NULL, ",", &save)) {
    char *colon = strrchr(item, ':');
    if (colon) *colon = '\0';
    if (take_host(flag, item, colon ? colon + 1 : NULL, o, err, err_size)) return -1;
    n++;
  }
  if (!n) {
    plaitrun_set_err(err, err_size,
                     "%s: no host in '%s' (expected host:slots, e.g. localhost:2)", flag,
                     list);
    return -1;
  }
  return 0;
}

static int take_hostfile(const char *flag, const char *path, plaitrun_options_t *o, char *err,
                         size_t err_size) {
  FILE *f = fopen(path, "r");
  if (!f) {
    plaitrun_set_err(err, err_size, "%s %s: %s", flag, path, strerror(errno));
    return -1;
  }
  o->slots = 0;
  o->n_hosts = 0;
  o->remote = 0;
  char line[1024];
  int n = 0, rc = 0;
  while (rc == 0 && fgets(line, sizeof line, f)) {
    char host[512], slots[64];
    char *p = line;
    while (isspace((unsigned char)*p)) p++;
    if (!*p || *p == '#') continue;
    if (sscanf(p, "%511s slots=%63s", host, slots) != 2) {
      line[strcspn(line, "\n")] = '\0';
      plaitrun_set_err(err, err_size,
                       "%s %s: line '%s' is not '<hostname> slots=<slots>'", flag, path,
                       line);
      rc = -1;
      break;
    }
    rc = take_host(flag, host, slots, o, err, err_size);
    n++;
  }
  fclose(f);
  if (rc == 0 && n == 0) {
    plaitrun_set_err(err, err_size, "%s %s: no host in the file", flag, path);
    rc = -1;
  }
  return rc;
}

int plaitrun_horovod_flag(int argc, char **argv, int *i, plaitrun_options_t *o, char *err,
                          size_t err_size) {
  const char *arg = argv[*i];
  const char *eq = strchr(arg, '=');
  size_t len = eq ? (size_t)(eq - arg) : strlen(arg);
  const hflag_t *h = find(arg, len);
  if (!h) return 0;
  const char *flag = h->names[0];
  for (int k = 0; k < 3 && h->names[k]; k++)
    if (strlen(h->names[k]) == len && !strncmp(h->names[k], arg, len)) flag = h->names[k];
  const char *value = eq ? eq + 1 : NULL;
  if (h->val == V_NONE && value) {
    plaitrun_set_err(err, err_size, "option '%s' takes no value", flag);
    return -1;
  }
  if (h->how == H_REFUSE) {
    plaitrun_set_err(err, err_size, "%s is not supported: %s", flag, h->why);
    return -1;
  }
  if (h->val != V_NONE && !value) {
    if (*i + 1 >= argc) {
      plaitrun_set_err(err, err_size, "option '%s' needs a value", flag);
      return -1;
    }
    *i += 1;
    value = argv[*i];
  }
  *i += 1;
  char text[1024];
  switch (h->how) {
  case H_VERSION: o->action = PLAITRUN_ACTION_VERSION; return 1;
  case H_CHECK_BUILD: o->action = PLAITRUN_ACTION_CHECK_BUILD; return 1;
  case H_VERBOSE: o->verbose = 1; return 1;
  case H_HOSTS: return take_hosts(flag, value, o, err, err_size) ? -1 : 1;
  case H_HOSTFILE: return take_hostfile(flag, value, o, err, err_size) ? -1 : 1;
  case H_SSH_PORT:
    if (check_value(h, flag, value, text, sizeof text, err, err_size)) return -1;
    o->ssh_port = value;
    return 1;
  case H_SSH_IDENTITY:
    if (!*value || value[0] == '-') {
      plaitrun_set_err(err, err_size, "%s '%s': expected the path of a key file", flag, value);
      return -1;
    }
    o->ssh_identity = value;
    return 1;
  case H_OUTPUT:
    if (!*value) {
      plaitrun_set_err(err, err_size, "%s: the folder name is empty", flag);
      return -1;
    }
    o->output_dir = value;
    return 1;
  case H_NOOP:
    if (o->verbose) fprintf(stderr, "plaitrun: %s: no effect: %s\n", flag, h->why);
    return 1;
  case H_ENV:
    if (check_value(h, flag, value, text, sizeof text, err, err_size)) return -1;
    if (add_env(o, flag, h->var, text, 0, err, err_size)) return -1;
    for (int k = 0; k < 2 && h->unset[k]; k++)
      if (add_env(o, flag, h->unset[k], NULL, 1, err, err_size)) return -1;
    return 1;
  case H_REFUSE: break;
  }
  return -1;
}

int plaitrun_horovod_check(const plaitrun_options_t *o, char *err, size_t err_size) {
  if (o->slots && o->nranks > o->slots) {
    plaitrun_set_err(err, err_size,
                     "-np %d is more than the %d slot%s the hosts give (-H/--hostfile)",
                     o->nranks, o->slots, o->slots == 1 ? "" : "s");
    return -1;
  }
  return 0;
}

int plaitrun_horovod_apply_env(const plaitrun_options_t *o, char *err, size_t err_size) {
  for (int k = 0; k < o->n_env; k++) {
    const plaitrun_env_t *e = &o->env[k];
    const char *before = getenv(e->name);
    if (e->unset) {
      if (before && o->verbose)
        fprintf(stderr, "plaitrun: %s: %s=%s removed from the ranks' environment (the flag wins, "
                "as under horovodrun)\n", e->flag, e->name, before);
      else if (before)
        fprintf(stderr, "plaitrun: %s overrides %s=%s\n", e->flag, e->name, before);
      if (unsetenv(e->name) != 0) {
        plaitrun_set_err(err, err_size, "unsetenv %s: %s", e->name, strerror(errno));
        return -1;
      }
      continue;
    }
    if (o->verbose)
      fprintf(stderr, "plaitrun: %s: %s=%s\n", e->flag, e->name, e->value);
    else if (before && strcmp(before, e->value))
      fprintf(stderr, "plaitrun: %s overrides %s=%s\n", e->flag, e->name, before);
    if (setenv(e->name, e->value, 1) != 0) {
      plaitrun_set_err(err, err_size, "setenv %s: %s", e->name, strerror(errno));
      return -1;
    }
  }
  return 0;
}
