/* Internal: configuration parsed once from the environment. */
#ifndef PLAIT_CONFIG_H
#define PLAIT_CONFIG_H

#include <stddef.h>
#include <stdint.h>

#include "util/config_table.h"
#include "plait/parse_size.h"
#include "plait/plait.h"

#define PLAIT_CFG_CTYPE_NAME char *
#define PLAIT_CFG_CTYPE_TEXT char *
#define PLAIT_CFG_CTYPE_SIZE uint64_t
#define PLAIT_CFG_CTYPE_COUNT int64_t
#define PLAIT_CFG_CTYPE_RANKNUM int
#define PLAIT_CFG_CTYPE_SECONDS double
#define PLAIT_CFG_CTYPE_POSITIVE double
#define PLAIT_CFG_CTYPE_BOOL int
#define PLAIT_CFG_CTYPE_LEVEL int

typedef struct plait_config {
#define X(field, var, type, def, range, help) PLAIT_CFG_CTYPE_##type field;
  PLAIT_CONFIG_TABLE(X)
#undef X
  uint64_t given; /* bit i: the table's i-th variable was set (environment, a Horovod
                     variable or plait_config_parse_var), not left at its default */
} plait_config_t;

/* Fills cfg from the environment (defaults where unset). On a bad value
 * returns PLAIT_ERR_CONFIG naming the variable, the value and what it accepts;
 * cfg is then left empty (nothing to free). */
plait_result_t plait_config_load(plait_config_t *cfg);
void plait_config_free(plait_config_t *cfg);

/* 1 when cfg's value of var was set rather than defaulted (see given). */
int plait_config_given(const plait_config_t *cfg, const char *var);

/* 1 when var is a variable of the table. */
int plait_config_known(const char *var);

/* Parses value into cfg's field for var (a numeric variable of the table),
 * strictly, as plait_config_load would. PLAIT_ERR_CONFIG naming var, the
 * value and what it accepts, or that var is not a plait variable. */
plait_result_t plait_config_parse_var(plait_config_t *cfg, const char *var, const char *value);

/* "NAME=value\n" per variable (the secret is never printed). */
plait_result_t plait_config_format(const plait_config_t *cfg, char *buf,
                                   size_t buf_size, size_t *needed);

/* Unknown PLAIT_* variables in the environment, for a warning: writes a
 * comma-separated list into buf; returns how many. */
int plait_config_unknown(char *buf, size_t buf_size);

/* Parsers, exposed for tests. Each returns 0 on success, -1 on bad input.
 * Sizes: plait_parse_size (plait/parse_size.h, included above), the one
 * size parser of the core, the plugins and the benchmarks. */
int plait_parse_bool(const char *text, int *out);
int plait_parse_level(const char *text, int *out);
const char *plait_level_name(int level);

#endif
