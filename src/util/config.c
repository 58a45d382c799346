/* The configuration table, parsed strictly from the environment. */
#include "util/config.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "util/config_horovod.h"
#include "util/error.h"
#include "util/secret_file.h"
#include "plait/transport.h"

extern char **environ;

typedef enum {
  T_NAME, T_TEXT, T_SIZE, T_COUNT, T_RANKNUM, T_SECONDS, T_POSITIVE, T_BOOL,
  T_LEVEL
} cfg_type_t;

typedef struct {
  const char *var;
  cfg_type_t type;
  const char *type_name;
  const char *def;
  const char *range; /* "lo..hi" for numeric types, else "" */
  const char *help;
  size_t offset;
} cfg_entry_t;

static const cfg_entry_t entries[] = {
#define X(field, var, type, def, range, help) \
  {var, T_##type, #type, def, range, help, offsetof(plait_config_t, field)},
    PLAIT_CONFIG_TABLE(X)
#undef X
};
#define N_ENTRIES (sizeof entries / sizeof entries[0])
_Static_assert(N_ENTRIES <= 64, "plait_config_t.given has one bit per variable");

static const char *accepts(cfg_type_t t) {
  switch (t) {
  case T_NAME: return "a lowercase name of letters, digits and '_' (e.g. gloo)";
  case T_TEXT: return "any text without a line break";
  case T_SIZE: return "a size in bytes such as 65536, 64K, 64M or 1G (K = 1024)";
  case T_COUNT: return "an integer >= 0";
  case T_RANKNUM: return "an integer >= 0";
  case T_SECONDS: return "a number >= 0 (fractions allowed)";
  case T_POSITIVE: return "a number > 0 (fractions allowed)";
  case T_BOOL: return "0, 1, true, false, yes, no, on or off";
  case T_LEVEL: return "trace, debug, info, warn, error or off";
  }
  return "?";
}

int plait_parse_bool(const char *text, int *out) {
  static const char *yes[] = {"1", "true", "yes", "on"};
  static const char *no[] = {"0", "false", "no", "off"};
  for (size_t i = 0; i < 4; i++) {
    if (!strcasecmp(text, yes[i])) { *out = 1; return 0; }
    if (!strcasecmp(text, no[i])) { *out = 0; return 0; }
  }
  return -1;
}

static const char *level_names[] = {"trace", "debug", "info", "warn", "error", "off"};

int plait_parse_level(const char *text, int *out) {
  for (int i = 0; i <= PLAIT_LOG_OFF; i++)
    if (!strcasecmp(text, level_names[i])) { *out = i; return 0; }
  if (!strcasecmp(text, "warning")) { *out = PLAIT_LOG_WARN; return 0; }
  return -1;
}

const char *plait_level_name(int level) {
  return level >= 0 && level <= PLAIT_LOG_OFF ? level_names[level] : "?";
}

static int parse_number(const char *text, double *out) {
  if (!*text || isspace((unsigned char)*text)) return -1;
  char *end;
  errno = 0;
  double v = strtod(text, &end);
  if (errno || *end || !isfinite(v)) return -1;
  *out = v;
  return 0;
}

static int parse_int(const char *text, long long max, long long *out) {
  if (!isdigit((unsigned char)*text)) return -1;
  char *end;
  errno = 0;
  long long v = strtoll(text, &end, 10);
  if (errno || *end || v < 0 || v > max) return -1;
  *out = v;
  return 0;
}

static int parse_name(const char *text) {
  if (!*text || strlen(text) > 64) return -1;
  for (const char *p = text; *p; p++)
    if (!(islower((unsigned char)*p) || isdigit((unsigned char)*p) || *p == '_')) return -1;
  return 0;
}

/* A numeric value of e's type as a double (sizes and counts up to 2^53 are
 * exact, enough for every range of the table); -1 on bad text. */
static int numeric_value(const cfg_entry_t *e, const char *text, double *out) {
  uint64_t u;
  long long ll;
  switch (e->type) {
  case T_SIZE:
    if (plait_parse_size(text, &u)) return -1;
    *out = (double)u;
    return 0;
  case T_COUNT:
  case T_RANKNUM:
    if (parse_int(text, INT64_MAX, &ll)) return -1;
    *out = (double)ll;
    return 0;
  case T_SECONDS:
  case T_POSITIVE: return parse_number(text, out);
  default: return -1;
  }
}

/* 0 when text (already valid for e's type) lies within e's range; -1 when it
 * does not. lo and hi are the range's two ends as written in the table. */
static int in_range(const cfg_entry_t *e, const char *text, char *lo, char *hi, size_t cap) {
  const char *dots = strstr(e->range, "..");
  if (!*e->range || !dots) return 0;
  snprintf(lo, cap, "%.*s", (int)(dots - e->range), e->range);
  snprintf(hi, cap, "%s", dots + 2);
  double v, min, max;
  if (numeric_value(e, text, &v) || numeric_value(e, lo, &min) || numeric_value(e, hi, &max))
    return -1;
  return v >= min && v <= max ? 0 : -1;
}

/* The error for a value of e that parsed but lies outside its range. */
static plait_result_t range_error(const cfg_entry_t *e, const char *text, int from_env) {
  char lo[32], hi[32];
  in_range(e, text, lo, hi, sizeof lo);
  return plait_error(PLAIT_ERR_CONFIG, "%s='%s' is out of range%s: expected %s to %s (%s)",
                     e->var, text, from_env ? "" : " (built-in default)", lo, hi, e->help);
}

/* The type's own parse of text into e's field; -1 on bad input. */
static int parse_value(const cfg_entry_t *e, const char *text, plait_config_t *cfg) {
  char *field = (char *)cfg + e->offset;
  double d;
  long long ll;
  switch (e->type) {
  case T_NAME:
  case T_TEXT: {
    if (e->type == T_NAME && parse_name(text)) return -1;
    char *copy = strdup(text);
    if (!copy) return -2;
    *(char **)field = copy;
    return 0;
  }
  case T_SIZE: return plait_parse_size(text, (uint64_t *)field);
  case T_COUNT:
    if (parse_int(text, INT64_MAX, &ll)) return -1;
    *(int64_t *)field = ll;
    return 0;
  case T_RANKNUM:
    if (!*text) { *(int *)field = -1; return 0; }
    if (parse_int(text, INT_MAX, &ll)) return -1; /* the range bounds it */
    *(int *)field = (int)ll;
    return 0;
  case T_SECONDS:
  case T_POSITIVE:
    if (parse_number(text, &d) || d < 0 || (e->type == T_POSITIVE && d == 0)) return -1;
    *(double *)field = d;
    return 0;
  case T_BOOL: return plait_parse_bool(text, (int *)field);
  case T_LEVEL: return plait_parse_level(text, (int *)field);
  }
  return -1;
}

/* Parses text into the field of cfg that e describes; -1 on bad input, -2
 * out of memory, -3 when it is valid for the type but outside e's range. */
static int parse_entry(const cfg_entry_t *e, const char *text, plait_config_t *cfg) {
  int rc = parse_value(e, text, cfg);
  char lo[32], hi[32];
  if (rc == 0 && *e->range && *text && in_range(e, text, lo, hi, sizeof lo)) return -3;
  return rc;
}

plait_result_t plait_config_load(plait_config_t *cfg) {
  memset(cfg, 0, sizeof *cfg);
  for (size_t i = 0; i < N_ENTRIES; i++) {
    const cfg_entry_t *e = &entries[i];
    const char *v = getenv(e->var);
    int from_env = v != NULL;
    if (v && e->type == T_TEXT && strpbrk(v, "\r\n")) { /* it would print as two settings */
      plait_config_free(cfg);
      return plait_error(PLAIT_ERR_CONFIG, "%s='%s' is not valid: expected text without a line "
                         "break (plait prints its settings one per line)", e->var, v);
    }
    if (!v) v = e->def;
    if (from_env) cfg->given |= UINT64_C(1) << i;
    int rc = parse_entry(e, v, cfg);
    if (rc == -2) {
      plait_config_free(cfg);
      return plait_error(PLAIT_ERR_NO_MEMORY, "out of memory reading %s", e->var);
    }
    if (rc == -3) {
      plait_config_free(cfg);
      return range_error(e, v, from_env);
    }
    if (rc) {
      plait_config_free(cfg);
      return plait_error(PLAIT_ERR_CONFIG, "%s='%s' is not valid%s: expected %s",
                         e->var, v, from_env ? "" : " (built-in default)",
                         accepts(e->type));
    }
  }
  plait_result_t rc = plait_config_horovod_apply(cfg); /* HOROVOD_* where PLAIT_* is unset */
  if (!rc && (!cfg->secret || !*cfg->secret) && cfg->secret_file && *cfg->secret_file) {
    char *secret;
    rc = plait_secret_file_read(cfg->secret_file, &secret); /* PLAIT_SECRET wins when set */
    if (!rc) {
      free(cfg->secret);
      cfg->secret = secret;
    }
  }
  if (rc) {
    plait_config_free(cfg);
    return rc;
  }
  return PLAIT_SUCCESS;
}

int plait_config_given(const plait_config_t *cfg, const char *var) {
  for (size_t i = 0; i < N_ENTRIES; i++)
    if (!strcmp(entries[i].var, var)) return (cfg->given >> i) & 1;
  return 0;
}

int plait_config_known(const char *var) {
  for (size_t i = 0; i < N_ENTRIES; i++)
    if (!strcmp(entries[i].var, var)) return 1;
  return 0;
}

plait_result_t plait_config_parse_var(plait_config_t *cfg, const char *var, const char *value) {
  for (size_t i = 0; i < N_ENTRIES; i++) {
    const cfg_entry_t *e = &entries[i];
    if (strcmp(e->var, var)) continue;
    if (e->type == T_NAME || e->type == T_TEXT)
      return plait_error(PLAIT_ERR_INTERNAL, "plait_config_parse_var: %s is text", var);
    int rc = parse_entry(e, value, cfg);
    if (rc == -3) return range_error(e, value, 1);
    if (rc)
      return plait_error(PLAIT_ERR_CONFIG, "%s='%s' is not valid: expected %s", var, value,
                         accepts(e->type));
    cfg->given |= UINT64_C(1) << i;
    return PLAIT_SUCCESS;
  }
  return plait_error(PLAIT_ERR_CONFIG, "%s is not a plait variable (see plaitrun --help-env)",
                     var);
}

void plait_config_free(plait_config_t *cfg) {
  if (!cfg) return;
  for (size_t i = 0; i < N_ENTRIES; i++) {
    if (entries[i].type == T_NAME || entries[i].type == T_TEXT) {
      char **p = (char **)((char *)cfg + entries[i].offset);
      free(*p);
      *p = NULL;
    }
  }
}

/* Appends to a bounded buffer, counting what it would need. */
typedef struct {
  char *buf;
  size_t size, used;
} sink_t;

static void sink_printf(sink_t *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void sink_printf(sink_t *s, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  size_t room = s->used < s->size ? s->size - s->used : 0;
  int n = vsnprintf(room ? s->buf + s->used : NULL, room, fmt, ap);
  va_end(ap);
  if (n > 0) s->used += (size_t)n;
}

static plait_result_t sink_finish(sink_t *s, size_t *needed) {
  if (needed) *needed = s->used + 1;
  if (s->used + 1 > s->size) {
    if (s->size) s->buf[s->size - 1] = '\0';
    return plait_error(PLAIT_ERR_BUFFER_TOO_SMALL, "buffer of %zu bytes is too small: %zu needed",
                       s->size, s->used + 1);
  }
  return PLAIT_SUCCESS;
}

static void format_value(sink_t *s, const cfg_entry_t *e, const plait_config_t *cfg) {
  const char *field = (const char *)cfg + e->offset;
  switch (e->type) {
  case T_NAME:
  case T_TEXT: {
    const char *v = *(char *const *)field;
    if (!strcmp(e->var, "PLAIT_SECRET"))
      sink_printf(s, "%s", v && *v ? "(set, not shown)" : "");
    else
      sink_printf(s, "%s", v ? v : "");
    break;
  }
  case T_SIZE: sink_printf(s, "%llu", (unsigned long long)*(const uint64_t *)field); break;
  case T_COUNT: sink_printf(s, "%lld", (long long)*(const int64_t *)field); break;
  case T_RANKNUM:
    if (*(const int *)field >= 0) sink_printf(s, "%d", *(const int *)field);
    break;
  case T_SECONDS:
  case T_POSITIVE: sink_printf(s, "%g", *(const double *)field); break;
  case T_BOOL: sink_printf(s, "%d", *(const int *)field); break;
  case T_LEVEL: sink_printf(s, "%s", plait_level_name(*(const int *)field)); break;
  }
}

plait_result_t plait_config_format(const plait_config_t *cfg, char *buf, size_t buf_size,
                                   size_t *needed) {
  sink_t s = {buf, buf_size, 0};
  for (size_t i = 0; i < N_ENTRIES; i++) {
    sink_printf(&s, "%s=", entries[i].var);
    format_value(&s, &entries[i], cfg);
    sink_printf(&s, "\n");
  }
  size_t notes = plait_config_horovod_notes(NULL, 0); /* "# HOROVOD_X=... taken as ..." */
  size_t room = s.used < s.size ? s.size - s.used : 0;
  plait_config_horovod_notes(room ? s.buf + s.used : NULL, room);
  s.used += notes;
  return sink_finish(&s, needed);
}

int plait_config_unknown(char *buf, size_t buf_size) {
  int n = 0;
  sink_t s = {buf, buf_size, 0};
  if (buf_size) buf[0] = '\0';
  for (char **e = environ; e && *e; e++) {
    if (strncmp(*e, "PLAIT_", 6)) continue;
    size_t len = strcspn(*e, "=");
    int known = 0;
    for (size_t i = 0; i < N_ENTRIES && !known; i++)
      known = strlen(entries[i].var) == len && !strncmp(entries[i].var, *e, len);
    /* Variables read by plugins, bindings and tools are theirs to check: the
     * gloo and ofi plugins report unknown names of their prefix at init;
     * PLAIT_TENSORFLOW_* by plait.tensorflow, PLAIT_MXNET_* by plait.mxnet;
     * PLAIT_WITH_* and PLAIT_WITHOUT_* are pip install's build switches;
     * PLAIT_SOAK_* are the test watchdogs' (tests/faults/soak, hang_watch.py). */
    static const char *foreign[] = {"PLAIT_LIBRARY", "PLAIT_OFI_", "PLAIT_GLOO_",
                                    "PLAIT_TEST_", "PLAIT_BENCH_", "PLAIT_CI_", "PLAIT_SOAK_",
                                    "PLAIT_WITH_", "PLAIT_WITHOUT_", "PLAIT_TENSORFLOW_",
                                    "PLAIT_MXNET_"};
    for (size_t i = 0; i < sizeof foreign / sizeof foreign[0] && !known; i++)
      known = !strncmp(*e, foreign[i], strlen(foreign[i]));
    if (!known) {
      sink_printf(&s, "%s%.*s", n ? ", " : "", (int)len, *e);
      n++;
    }
  }
  return n;
}

PLAIT_API plait_result_t plait_config_help(char *buf, size_t buf_size, size_t *needed) {
  if (!buf && buf_size)
    return plait_error(PLAIT_ERR_INVALID_ARGUMENT, "plait_config_help: buf is NULL but buf_size is %zu",
                       buf_size);
  sink_t s = {buf, buf_size, 0};
  for (size_t i = 0; i < N_ENTRIES; i++) {
    const cfg_entry_t *e = &entries[i];
    sink_printf(&s, "%-24s %-8s default: %s%s%s\n    %s\n", e->var, e->type_name,
                *e->def ? e->def : "(unset)", *e->range ? ", range: " : "", e->range, e->help);
  }
  return sink_finish(&s, needed);
}
