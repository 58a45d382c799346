/* Horovod 0.28's environment variables, taken where plait has an equivalent. */
#include "util/config_horovod.h"

#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "util/error.h"
#include "util/log.h"

extern char **environ;

/* How a Horovod value becomes a plait one. */
typedef enum {
  K_BYTES,       /* strtol, bytes: PLAIT size */
  K_MS,          /* strtof, milliseconds, >= 0 */
  K_COUNT,       /* strtol, >= 0 */
  K_SECONDS,     /* strtol, whole seconds >= 0 */
  K_POS_SECONDS, /* strtol, whole seconds > 0 */
  K_RANKNUM,     /* a rank or count: must be a clean integer >= 0 */
  K_LEVEL,       /* Horovod's log level names */
  K_TEXT,        /* taken as is */
  K_TIMELINE,    /* a path, or DYNAMIC */
  K_FLAG         /* strtol > 0 is on, anything else off */
} kind_t;

typedef struct {
  const char *hvd, *plait;
  kind_t kind;
} mapped_t;

static const mapped_t MAPPED[] = {
    {"HOROVOD_FUSION_THRESHOLD", "PLAIT_FUSION_THRESHOLD", K_BYTES},
    {"HOROVOD_CYCLE_TIME", "PLAIT_CYCLE_TIME_MS", K_MS},
    {"HOROVOD_CACHE_CAPACITY", "PLAIT_CACHE_CAPACITY", K_COUNT},
    {"HOROVOD_TIMELINE", "PLAIT_TIMELINE", K_TIMELINE},
    {"HOROVOD_STALL_CHECK_TIME_SECONDS", "PLAIT_STALL_WARN_S", K_SECONDS},
    {"HOROVOD_STALL_SHUTDOWN_TIME_SECONDS", "PLAIT_STALL_ABORT_S", K_SECONDS},
    {"HOROVOD_GLOO_TIMEOUT_SECONDS", "PLAIT_TIMEOUT_S", K_POS_SECONDS},
    {"HOROVOD_START_TIMEOUT", "PLAIT_START_TIMEOUT_S", K_POS_SECONDS},
    {"HOROVOD_LOG_LEVEL", "PLAIT_LOG_LEVEL", K_LEVEL},
    {"HOROVOD_RANK", "PLAIT_RANK", K_RANKNUM},
    {"HOROVOD_SIZE", "PLAIT_SIZE", K_RANKNUM},
    {"HOROVOD_LOCAL_RANK", "PLAIT_LOCAL_RANK", K_RANKNUM},
    {"HOROVOD_LOCAL_SIZE", "PLAIT_LOCAL_SIZE", K_RANKNUM},
    {"HOROVOD_HOSTNAME", "PLAIT_HOSTNAME", K_TEXT},
    {"HOROVOD_TIMELINE_MARK_CYCLES", "PLAIT_TIMELINE_MARK_CYCLES", K_FLAG},
    {"HOROVOD_DYNAMIC_PROCESS_SETS", "PLAIT_DYNAMIC_PROCESS_SETS", K_FLAG},
    {"HOROVOD_AUTOTUNE", "PLAIT_AUTOTUNE", K_FLAG},
    {"HOROVOD_HIERARCHICAL_ALLREDUCE", "PLAIT_HIERARCHICAL_ALLREDUCE", K_FLAG},
    {"HOROVOD_HIERARCHICAL_ALLGATHER", "PLAIT_HIERARCHICAL_ALLGATHER", K_FLAG},
    {"HOROVOD_THREAD_AFFINITY", "PLAIT_THREAD_AFFINITY", K_TEXT},
    {"HOROVOD_AUTOTUNE_LOG", "PLAIT_AUTOTUNE_LOG", K_TEXT},
    {"HOROVOD_AUTOTUNE_WARMUP_SAMPLES", "PLAIT_AUTOTUNE_WARMUP_SAMPLES", K_COUNT},
    {"HOROVOD_AUTOTUNE_STEPS_PER_SAMPLE", "PLAIT_AUTOTUNE_STEPS_PER_SAMPLE", K_COUNT},
    {"HOROVOD_AUTOTUNE_BAYES_OPT_MAX_SAMPLES", "PLAIT_AUTOTUNE_MAX_SAMPLES", K_COUNT},
};
#define N_MAPPED (sizeof MAPPED / sizeof MAPPED[0])

/* When a variable without an equivalent matters. */
typedef enum {
  W_ANY,     /* whenever set */
  W_GT0,     /* when Horovod reads it as on (strtol > 0) */
  W_NOT_GLOO /* unless it names Gloo (what horovodrun --gloo sets) */
} when_t;

typedef struct {
  const char *var;
  when_t when;
  const char *why;
} unsupported_t;

static const unsupported_t UNSUPPORTED[] = {
    {"HOROVOD_AUTOTUNE_GAUSSIAN_PROCESS_NOISE", W_ANY,
     "plait's autotuner searches a grid by coordinate descent and measures the noise "
     "itself, from the spread of repeated samples; it has no Gaussian process to give a "
     "noise level"},
    {"HOROVOD_TORUS_ALLREDUCE", W_GT0, "plait has no torus allreduce"},
    {"HOROVOD_ELASTIC", W_GT0,
     "plait's elastic workers are started by plaitrun's elastic driver (--min-np, --max-np, "
     "--host-discovery-script), which sets PLAIT_ELASTIC_DRIVER; horovodrun's is not "
     "supported, and this variable changes nothing"},
    {"HOROVOD_DISABLE_GROUP_FUSION", W_GT0,
     "plait has no switch to keep grouped tensors out of other fused buffers"},
    {"HOROVOD_NUM_NCCL_STREAMS", W_ANY, "plait's nccl plugin runs one stream per device"},
    {"HOROVOD_BATCH_D2D_MEMCOPIES", W_ANY, "plait has no GPU transport yet"},
    {"HOROVOD_ENABLE_ASYNC_COMPLETION", W_GT0, "plait has no GPU transport yet"},
    {"HOROVOD_ENABLE_XLA_OPS", W_GT0, "plait has no TensorFlow (XLA) binding yet"},
    {"HOROVOD_ADASUM_MPI_CHUNK_SIZE", W_ANY, "plait has no Adasum reduction"},
    {"HOROVOD_CPU_OPERATIONS", W_NOT_GLOO,
     "plait's CPU collectives run over PLAIT_TRANSPORT (auto, gloo or ofi), never MPI or oneCCL"},
    {"HOROVOD_CONTROLLER", W_NOT_GLOO,
     "plait coordinates over its own authenticated TCP control plane, never MPI"},
};
#define N_UNSUPPORTED (sizeof UNSUPPORTED / sizeof UNSUPPORTED[0])

/* Set by horovodrun for its own wiring, or with no effect on what plait does:
 * neither taken nor reported. */
static const char *HARMLESS[] = {
    "HOROVOD_GLOO_RENDEZVOUS_ADDR", /* handled with the port below */
    "HOROVOD_GLOO_RENDEZVOUS_PORT",
    "HOROVOD_STALL_CHECK_DISABLE", /* handled below */
    "HOROVOD_CROSS_RANK",          /* plait derives cross rank and size at rendezvous */
    "HOROVOD_CROSS_SIZE",
    "HOROVOD_GLOO_IFACE",            /* plait's Gloo uses the address that reached rank 0 */
    "HOROVOD_MPI_THREADS_DISABLE",   /* plait does not use MPI */
    "HOROVOD_LOG_HIDE_TIME",         /* format of Horovod's own log lines */
    "HOROVOD_DISABLE_NVTX_RANGES",   /* no NVTX ranges in plait */
    "HOROVOD_CCL_CACHE",             /* no oneCCL in plait */
    "HOROVOD_CCL_BGT_AFFINITY",
};

/* Build-time variables of Horovod's setup.py: no meaning at run time. */
static const char *BUILD_PREFIXES[] = {"HOROVOD_WITH_", "HOROVOD_WITHOUT_", "HOROVOD_GPU",
                                       "HOROVOD_BUILD_", "HOROVOD_CUDA_", "HOROVOD_NCCL_",
                                       "HOROVOD_ROCM_", "HOROVOD_CMAKE", "HOROVOD_MPI_",
                                       "HOROVOD_DEBUG", "HOROVOD_ALLOW_MIXED_GPU_IMPL"};

long long plait_horovod_strtol(const char *text, int *clean) {
  char *end;
  errno = 0;
  long long v = strtoll(text, &end, 10);
  *clean = *text && !isspace((unsigned char)*text) && !*end && !errno;
  return v;
}

double plait_horovod_strtof(const char *text, int *clean) {
  char *end;
  errno = 0;
  double v = strtof(text, &end);
  *clean = *text && !isspace((unsigned char)*text) && !*end && !errno;
  return v;
}

/* Notes are lines "L text\n" with L = 'I' (info) or 'W' (warn). */
typedef struct {
  char *buf;
  size_t size, used;
} notes_t;

static void note(notes_t *n, char level, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void note(notes_t *n, char level, const char *fmt, ...) {
  if (!n) return;
  char line[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(line, sizeof line, fmt, ap);
  va_end(ap);
  size_t len = strlen(line);
  char *grown = realloc(n->buf, n->used + len + 4);
  if (!grown) return;
  n->buf = grown;
  n->used += (size_t)sprintf(n->buf + n->used, "%c %s\n", level, line);
}

/* Horovod's ParseLogLevelStr: lowercase trace..fatal, anything else WARNING. */
static const char *horovod_level(const char *text, int *known) {
  static const char *hvd[] = {"trace", "debug", "info", "warning", "error", "fatal"};
  static const char *plait[] = {"trace", "debug", "info", "warn", "error", "error"};
  for (size_t i = 0; i < 6; i++)
    if (!strcasecmp(text, hvd[i])) {
      *known = 1;
      return plait[i];
    }
  *known = 0;
  return "warn";
}

static int set_text(char **field, const char *value) {
  char *copy = strdup(value);
  if (!copy) return -1;
  free(*field);
  *field = copy;
  return 0;
}

static char **text_field(plait_config_t *cfg, const char *plait_var) {
  if (!strcmp(plait_var, "PLAIT_TIMELINE")) return &cfg->timeline;
  if (!strcmp(plait_var, "PLAIT_HOSTNAME")) return &cfg->hostname;
  if (!strcmp(plait_var, "PLAIT_RENDEZVOUS")) return &cfg->rendezvous;
  if (!strcmp(plait_var, "PLAIT_AUTOTUNE_LOG")) return &cfg->autotune_log;
  if (!strcmp(plait_var, "PLAIT_THREAD_AFFINITY")) return &cfg->thread_affinity;
  if (!strcmp(plait_var, "PLAIT_HIERARCHICAL_ALLREDUCE")) return &cfg->hierarchical_allreduce;
  if (!strcmp(plait_var, "PLAIT_HIERARCHICAL_ALLGATHER")) return &cfg->hierarchical_allgather;
  return NULL;
}

/* A bad Horovod value: an error when applying, a warning note otherwise. */
static plait_result_t bad(notes_t *notes, const char *var, const char *value, const char *expect) {
  if (notes) {
    note(notes, 'W', "%s='%s' is not valid: expected %s", var, value, expect);
    return PLAIT_SUCCESS;
  }
  return plait_error(PLAIT_ERR_CONFIG, "%s='%s' is not valid: expected %s (plait reads Horovod's "
                     "variables when the PLAIT_* one is not set; see docs/configuration.md)",
                     var, value, expect);
}

/* Turns one Horovod value into plait's text for it; 1 done, 0 skip, -1 bad
 * (already reported). */
static int convert(const mapped_t *m, const char *v, char *out, size_t cap, notes_t *notes,
                   plait_result_t *rc) {
  int clean = 1;
  long long ll;
  double d;
  switch (m->kind) {
  case K_BYTES:
  case K_COUNT:
  case K_SECONDS:
  case K_POS_SECONDS:
    ll = plait_horovod_strtol(v, &clean);
    if (ll < 0 || (m->kind == K_POS_SECONDS && ll == 0)) {
      *rc = bad(notes, m->hvd, v, m->kind == K_POS_SECONDS ? "a whole number of seconds > 0"
                                                           : "a whole number >= 0");
      return -1;
    }
    snprintf(out, cap, "%lld", ll);
    break;
  case K_MS:
    d = plait_horovod_strtof(v, &clean);
    if (!(d >= 0) || d > 1e9) {
      *rc = bad(notes, m->hvd, v, "milliseconds >= 0 (fractions allowed)");
      return -1;
    }
    snprintf(out, cap, "%g", d);
    break;
  case K_RANKNUM:
    ll = plait_horovod_strtol(v, &clean);
    if (!clean || ll < 0 || ll > (1 << 24)) {
      *rc = bad(notes, m->hvd, v, "an integer >= 0");
      return -1;
    }
    snprintf(out, cap, "%lld", ll);
    return 1;
  case K_LEVEL:
    snprintf(out, cap, "%s", horovod_level(v, &clean));
    if (!clean)
      note(notes, 'W', "%s='%s' is not one of Horovod's levels (trace, debug, info, warning, "
           "error, fatal): Horovod reads it as warning, and so does plait", m->hvd, v);
    else if (!strcasecmp(v, "fatal"))
      note(notes, 'I', "%s=fatal: plait has no fatal level; error, the closest, is used", m->hvd);
    return 1;
  case K_TEXT:
    if (strpbrk(v, "\r\n")) {
      *rc = bad(notes, m->hvd, v, "text without a line break");
      return -1;
    }
    snprintf(out, cap, "%s", v);
    return 1;
  case K_FLAG:
    snprintf(out, cap, "%d", plait_horovod_strtol(v, &clean) > 0);
    break;
  case K_TIMELINE:
    if (!strcmp(v, "DYNAMIC")) {
      note(notes, 'I', "%s=DYNAMIC: no timeline until plait_timeline_start (hvd.start_timeline), "
           "as in Horovod", m->hvd);
      return 0;
    }
    if (strpbrk(v, "\r\n")) {
      *rc = bad(notes, m->hvd, v, "a path without a line break");
      return -1;
    }
    snprintf(out, cap, "%s", v);
    return 1;
  }
  if (!clean)
    note(notes, 'W', "%s='%s' is not a plain number: Horovod reads it as %s, and so does plait",
         m->hvd, v, out);
  return 1;
}

/* Applies one mapped variable to cfg (NULL: only notes). */
static plait_result_t take(const mapped_t *m, plait_config_t *cfg, notes_t *notes) {
  const char *v = getenv(m->hvd);
  if (!v) return PLAIT_SUCCESS;
  const char *mine = getenv(m->plait);
  if (mine) {
    note(notes, 'W', "%s=%s ignored: %s=%s is set and wins", m->hvd, v, m->plait, mine);
    return PLAIT_SUCCESS;
  }
  char text[4096];
  plait_result_t rc = PLAIT_SUCCESS;
  int ok = convert(m, v, text, sizeof text, notes, &rc);
  if (ok <= 0) return rc;
  note(notes, 'I', "%s=%s taken as %s=%s", m->hvd, v, m->plait, text);
  if (!cfg) return PLAIT_SUCCESS;
  char **field = text_field(cfg, m->plait);
  if (field) {
    if (set_text(field, text))
      return plait_error(PLAIT_ERR_NO_MEMORY, "out of memory reading %s", m->hvd);
    return PLAIT_SUCCESS;
  }
  if (m->kind == K_MS && atof(text) == 0) { /* Horovod allows 0 ms: no wait between cycles */
    cfg->cycle_time_ms = 0;
    return PLAIT_SUCCESS;
  }
  if (plait_config_parse_var(cfg, m->plait, text) == PLAIT_SUCCESS) return PLAIT_SUCCESS;
  char why[512];
  const char *expected = strstr(plait_last_error(), "expected ");
  snprintf(why, sizeof why, "%s", expected ? expected : plait_last_error());
  return plait_error(PLAIT_ERR_CONFIG, "%s='%s' is not valid for %s: %s (see "
                     "docs/configuration.md)", m->hvd, v, m->plait, why);
}

/* horovodrun's Gloo rendezvous: an HTTP store at ADDR:PORT that plait cannot
 * use; rank 0 of plait listens on ADDR:PORT+1 instead (docs/configuration.md). */
static plait_result_t take_rendezvous(plait_config_t *cfg, notes_t *notes) {
  const char *addr = getenv("HOROVOD_GLOO_RENDEZVOUS_ADDR");
  const char *port = getenv("HOROVOD_GLOO_RENDEZVOUS_PORT");
  if (!addr && !port) return PLAIT_SUCCESS;
  const char *mine = getenv("PLAIT_RENDEZVOUS");
  if (mine) {
    note(notes, 'W', "HOROVOD_GLOO_RENDEZVOUS_ADDR/PORT ignored: PLAIT_RENDEZVOUS=%s is set and "
         "wins", mine);
    return PLAIT_SUCCESS;
  }
  int clean = 0;
  long long p = port ? plait_horovod_strtol(port, &clean) : -1;
  if (!addr || !*addr || !clean || p < 1 || p > 65534) {
    if (notes) {
      note(notes, 'W', "HOROVOD_GLOO_RENDEZVOUS_ADDR='%s' and HOROVOD_GLOO_RENDEZVOUS_PORT='%s' "
           "do not make an address and a port from 1 to 65534", addr ? addr : "(unset)",
           port ? port : "(unset)");
      return PLAIT_SUCCESS;
    }
    return plait_error(PLAIT_ERR_CONFIG, "HOROVOD_GLOO_RENDEZVOUS_ADDR='%s' and "
                       "HOROVOD_GLOO_RENDEZVOUS_PORT='%s' do not make an address and a port from 1 "
                       "to 65534 (plait's rank 0 listens on that port + 1); set PLAIT_RENDEZVOUS="
                       "host:port instead", addr ? addr : "(unset)", port ? port : "(unset)");
  }
  char text[512];
  snprintf(text, sizeof text, strchr(addr, ':') ? "[%s]:%lld" : "%s:%lld", addr, p + 1);
  note(notes, 'I', "HOROVOD_GLOO_RENDEZVOUS_ADDR=%s HOROVOD_GLOO_RENDEZVOUS_PORT=%s taken as "
       "PLAIT_RENDEZVOUS=%s (horovodrun's own store has the port itself)", addr, port, text);
  if (cfg && set_text(&cfg->rendezvous, text))
    return plait_error(PLAIT_ERR_NO_MEMORY, "out of memory reading HOROVOD_GLOO_RENDEZVOUS_ADDR");
  return PLAIT_SUCCESS;
}

/* HOROVOD_STALL_CHECK_DISABLE > 0 turns Horovod's stall inspector off, warning
 * and shutdown alike: both plait times become 0 unless set with PLAIT_*. */
static plait_result_t take_stall_disable(plait_config_t *cfg, notes_t *notes) {
  const char *v = getenv("HOROVOD_STALL_CHECK_DISABLE");
  if (!v) return PLAIT_SUCCESS;
  int clean;
  long long on = plait_horovod_strtol(v, &clean);
  if (!clean)
    note(notes, 'W', "HOROVOD_STALL_CHECK_DISABLE='%s' is not a plain number: Horovod reads it as "
         "%lld (%s), and so does plait", v, on, on > 0 ? "on" : "off");
  if (on <= 0) return PLAIT_SUCCESS;
  static const char *vars[] = {"PLAIT_STALL_WARN_S", "PLAIT_STALL_ABORT_S"};
  for (int i = 0; i < 2; i++) {
    if (getenv(vars[i])) {
      note(notes, 'W', "HOROVOD_STALL_CHECK_DISABLE=%s ignored for %s: %s=%s is set and wins", v,
           vars[i], vars[i], getenv(vars[i]));
      continue;
    }
    note(notes, 'I', "HOROVOD_STALL_CHECK_DISABLE=%s taken as %s=0", v, vars[i]);
    if (cfg) PLAIT_CHECK(plait_config_parse_var(cfg, vars[i], "0"));
  }
  return PLAIT_SUCCESS;
}

static int known_elsewhere(const char *e, size_t len) {
  for (size_t i = 0; i < N_MAPPED; i++)
    if (strlen(MAPPED[i].hvd) == len && !strncmp(MAPPED[i].hvd, e, len)) return 1;
  for (size_t i = 0; i < sizeof HARMLESS / sizeof HARMLESS[0]; i++)
    if (strlen(HARMLESS[i]) == len && !strncmp(HARMLESS[i], e, len)) return 1;
  for (size_t i = 0; i < sizeof BUILD_PREFIXES / sizeof BUILD_PREFIXES[0]; i++)
    if (!strncmp(BUILD_PREFIXES[i], e, strlen(BUILD_PREFIXES[i]))) return 1;
  return 0;
}

/* Variables with no equivalent, and HOROVOD_* names plait does not know. */
static void report_rest(notes_t *notes) {
  if (!notes) return;
  for (size_t i = 0; i < N_UNSUPPORTED; i++) {
    const unsupported_t *u = &UNSUPPORTED[i];
    const char *v = getenv(u->var);
    if (!v) continue;
    int clean;
    if (u->when == W_GT0 && plait_horovod_strtol(v, &clean) <= 0) continue;
    if (u->when == W_NOT_GLOO && !strcasecmp(v, "gloo")) continue;
    note(notes, 'W', "%s=%s has no plait equivalent and is ignored: %s", u->var, v, u->why);
  }
  for (char **e = environ; e && *e; e++) {
    if (strncmp(*e, "HOROVOD_", 8)) continue;
    size_t len = strcspn(*e, "=");
    int listed = known_elsewhere(*e, len);
    for (size_t i = 0; i < N_UNSUPPORTED && !listed; i++)
      listed = strlen(UNSUPPORTED[i].var) == len && !strncmp(UNSUPPORTED[i].var, *e, len);
    if (!listed)
      note(notes, 'W', "%.*s is not a Horovod 0.28 variable plait knows; ignored", (int)len, *e);
  }
}

/* Every rule, in order; cfg NULL: notes only (never fails). */
static plait_result_t scan(plait_config_t *cfg, notes_t *notes) {
  for (size_t i = 0; i < N_MAPPED; i++) PLAIT_CHECK(take(&MAPPED[i], cfg, notes));
  PLAIT_CHECK(take_stall_disable(cfg, notes));
  PLAIT_CHECK(take_rendezvous(cfg, notes));
  report_rest(notes);
  return PLAIT_SUCCESS;
}

plait_result_t plait_config_horovod_apply(plait_config_t *cfg) { return scan(cfg, NULL); }

const char *plait_config_horovod_origin(const char *var) {
  if (!var || getenv(var)) return NULL;
  for (size_t i = 0; i < N_MAPPED; i++)
    if (!strcmp(MAPPED[i].plait, var) && getenv(MAPPED[i].hvd)) return MAPPED[i].hvd;
  if (!strcmp(var, "PLAIT_RENDEZVOUS") && getenv("HOROVOD_GLOO_RENDEZVOUS_ADDR"))
    return "HOROVOD_GLOO_RENDEZVOUS_ADDR";
  return NULL;
}

void plait_config_horovod_settle(plait_config_t *cfg, int rank) {
  notes_t n = {NULL, 0, 0};
  (void)scan(NULL, &n);
  for (char *line = n.buf; line && *line;) {
    char *end = strchr(line, '\n');
    *end = '\0';
    if (line[0] == 'W')
      PLAIT_WARN("config", "%s", line + 2);
    else
      PLAIT_INFO("config", "%s", line + 2);
    line = end + 1;
  }
  free(n.buf);
  const char *origin = plait_config_horovod_origin("PLAIT_TIMELINE");
  if (origin && rank != 0 && cfg->timeline && *cfg->timeline && !strstr(cfg->timeline, "%r")) {
    PLAIT_DEBUG("config", "HOROVOD_TIMELINE=%s is written by rank 0 only, as in Horovod (put %%r "
                "in PLAIT_TIMELINE for one file per rank)", cfg->timeline);
    cfg->timeline[0] = '\0';
  }
}

size_t plait_config_horovod_notes(char *buf, size_t buf_size) {
  notes_t n = {NULL, 0, 0};
  (void)scan(NULL, &n);
  size_t used = 0;
  if (buf_size) buf[0] = '\0';
  for (char *line = n.buf; line && *line;) {
    char *end = strchr(line, '\n');
    size_t len = (size_t)(end - line) - 2;
    if (buf && used + len + 4 <= buf_size) snprintf(buf + used, buf_size - used, "# %.*s\n",
                                                    (int)len, line + 2);
    used += len + 3;
    line = end + 1;
  }
  free(n.buf);
  return used;
}
