#include "flags.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef enum { E_MIN_NP, E_MAX_NP, E_SCRIPT, E_SLOTS, E_TIMEOUT, E_RESET, E_COOLDOWN } eflag_t;

typedef struct {
  const char *names[2];
  eflag_t id;
} edef_t;

static const edef_t EFLAGS[] = {
    {{"--min-np", "--min-num-proc"}, E_MIN_NP},
    {{"--max-np", "--max-num-proc"}, E_MAX_NP},
    {{"--host-discovery-script", NULL}, E_SCRIPT},
    {{"--slots-per-host", NULL}, E_SLOTS},
    {{"--elastic-timeout", NULL}, E_TIMEOUT},
    {{"--reset-limit", NULL}, E_RESET},
    {{"--blacklist-cooldown-range", NULL}, E_COOLDOWN},
};
#define N_EFLAGS (sizeof EFLAGS / sizeof EFLAGS[0])

void plaitrun_elastic_defaults(plaitrun_options_t *o) {
  o->elastic = 0;
  o->min_np = o->max_np = 0;
  o->discovery_script = NULL;
  o->slots_per_host = 0;
  o->elastic_timeout_s = PLAITRUN_ELASTIC_TIMEOUT_DEFAULT_S;
  o->reset_limit = -1;
  o->cooldown_min_s = o->cooldown_max_s = 0;
  o->elastic_only_flag = NULL;
}

static int take_count(const char *flag, const char *v, long lo, long hi, const char *what,
                      int *out, char *err, size_t err_size) {
  if (plaitrun_parse_whole(v, lo, hi, out) == 0) return 0;
  plaitrun_set_err(err, err_size, "%s '%s': expected %s from %ld to %ld", flag, v, what, lo, hi);
  return -1;
}

static int take_cooldown(const char *flag, const char *lo, const char *hi, plaitrun_options_t *o,
                         char *err, size_t err_size) {
  const long low = PLAITRUN_COOLDOWN_LOWEST_S, high = PLAITRUN_COOLDOWN_HIGHEST_S;
  if (plaitrun_parse_whole(lo, low, high, &o->cooldown_min_s) ||
      plaitrun_parse_whole(hi, low, high, &o->cooldown_max_s)) {
    plaitrun_set_err(err, err_size, "%s '%s' '%s': expected two whole numbers of seconds MIN MAX "
                     "from %ld to %ld (Horovod's bounds)", flag, lo, hi, low, high);
    return -1;
  }
  if (o->cooldown_min_s > o->cooldown_max_s) {
    plaitrun_set_err(err, err_size, "%s %s %s: MIN is above MAX", flag, lo, hi);
    return -1;
  }
  return 0;
}

static int apply(const edef_t *d, const char *flag, const char *v, const char *v2,
                 plaitrun_options_t *o, char *err, size_t err_size) {
  switch (d->id) {
  case E_MIN_NP:
    o->elastic = 1;
    return take_count(flag, v, 1, PLAITRUN_MAX_RANKS, "a whole number of workers", &o->min_np,
                      err, err_size);
  case E_MAX_NP:
    o->elastic = 1;
    return take_count(flag, v, 1, PLAITRUN_MAX_RANKS, "a whole number of workers", &o->max_np,
                      err, err_size);
  case E_SCRIPT:
    o->elastic = 1;
    if (!*v) {
      plaitrun_set_err(err, err_size, "%s: the script is empty", flag);
      return -1;
    }
    o->discovery_script = v;
    return 0;
  case E_SLOTS:
    o->elastic_only_flag = flag;
    return take_count(flag, v, 1, PLAITRUN_MAX_RANKS, "a whole number of slots",
                      &o->slots_per_host, err, err_size);
  case E_TIMEOUT:
    o->elastic_only_flag = flag;
    return take_count(flag, v, 1, 30L * 86400, "a whole number of seconds",
                      &o->elastic_timeout_s, err, err_size);
  case E_RESET:
    o->elastic_only_flag = flag;
    return take_count(flag, v, 0, 1000000, "a whole number of resets", &o->reset_limit, err,
                      err_size);
  case E_COOLDOWN:
    o->elastic_only_flag = flag;
    return take_cooldown(flag, v, v2, o, err, err_size);
  }
  return -1;
}

int plaitrun_elastic_flag(int argc, char **argv, int *i, plaitrun_options_t *o, char *err,
                          size_t err_size) {
  const char *arg = argv[*i];
  const char *eq = strchr(arg, '=');
  size_t len = eq ? (size_t)(eq - arg) : strlen(arg);
  const edef_t *d = NULL;
  const char *flag = NULL;
  for (size_t f = 0; f < N_EFLAGS && !d; f++)
    for (int k = 0; k < 2 && EFLAGS[f].names[k]; k++)
      if (strlen(EFLAGS[f].names[k]) == len && !strncmp(EFLAGS[f].names[k], arg, len)) {
        d = &EFLAGS[f];
        flag = EFLAGS[f].names[k];
      }
  if (!d) return 0;
  int need = d->id == E_COOLDOWN ? 2 : 1;
  const char *values[2] = {eq ? eq + 1 : NULL, NULL};
  int next = *i + 1;
  for (int k = values[0] ? 1 : 0; k < need; k++) {
    if (next >= argc) {
      plaitrun_set_err(err, err_size, "option '%s' needs %s", flag,
                       need == 2 ? "two values (MIN MAX seconds)" : "a value");
      return -1;
    }
    values[k] = argv[next++];
  }
  *i = next;
  return apply(d, flag, values[0], values[1], o, err, err_size) ? -1 : 1;
}

int plaitrun_elastic_check(plaitrun_options_t *o, char *err, size_t err_size) {
  if (!o->elastic) {
    if (o->elastic_only_flag) {
      plaitrun_set_err(err, err_size, "%s needs elastic mode: give --min-np, --max-np or "
                       "--host-discovery-script too", o->elastic_only_flag);
      return -1;
    }
    return 0;
  }
  if (o->min_np == 0) o->min_np = o->nranks;
  if (o->min_np == 0) {
    plaitrun_set_err(err, err_size,
                     "elastic mode needs --min-np N (or -np N): the fewest workers a job "
                     "may run with");
    return -1;
  }
  if (o->nranks == 0) o->nranks = o->min_np;
  if (o->nranks < o->min_np) {
    plaitrun_set_err(err, err_size, "-np %d is below --min-np %d", o->nranks, o->min_np);
    return -1;
  }
  if (o->max_np && o->max_np < o->nranks) {
    plaitrun_set_err(err, err_size, "--max-np %d is below %s %d", o->max_np,
                     o->nranks == o->min_np ? "--min-np" : "-np", o->nranks);
    return -1;
  }
  if (!o->discovery_script && o->n_hosts == 0) {
    const char *nodes = getenv("SLURM_JOB_NODELIST");
    plaitrun_set_err(err, err_size,
                     "elastic mode needs --host-discovery-script PATH or -H/--hostfile: "
                     "where workers may run%s%s%s",
                     nodes && *nodes ? " (in this Slurm allocation, of nodes " : "",
                     nodes && *nodes ? nodes : "",
                     nodes && *nodes ? ", a script running 'scontrol show hostnames "
                                       "\"$SLURM_JOB_NODELIST\"' with --slots-per-host N "
                                       "lists them: docs/slurm.md)" : "");
    return -1;
  }
  if (o->discovery_script && o->n_hosts) {
    plaitrun_set_err(err, err_size,
                     "give either --host-discovery-script or -H/--hostfile, not both");
    return -1;
  }
  if (o->output_dir) {
    plaitrun_set_err(err, err_size,
                     "--output-filename is not supported in elastic mode: a worker's rank "
                     "changes from one epoch to the next");
    return -1;
  }
  return 0;
}
