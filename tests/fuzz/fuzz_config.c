/*
 * libFuzzer harness: the configuration parser. The input's first byte picks
 * a variable (every PLAIT_* of the table, the HOROVOD_* ones libplait takes,
 * and the launcher variables the topology reads); the rest, up to a NUL, is
 * its value. The value goes through the parser that variable uses
 * (plait_config_load with the variable set, plait_config_parse_var, the
 * topology reader for launcher variables) and through each of the small
 * parsers (sizes with units, booleans, log levels, Slurm node lists). Each
 * must accept or refuse with an error, never crash, leak or hang. A value
 * plait accepts must also read back as the same setting from what
 * plait_config_format (plait_config_dump, the info log) prints for it. Run
 * with ci/fuzz; seeds in tests/fuzz/corpus/config.
 */
#include "control/topology.h"
#include "util/config.h"
#include "util/config_horovod.h"
#include "util/log.h"

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

static const char *const VARS[] = {
#define X(field, var, type, def, range, help) var,
    PLAIT_CONFIG_TABLE(X)
#undef X
    "HOROVOD_FUSION_THRESHOLD", "HOROVOD_CYCLE_TIME", "HOROVOD_CACHE_CAPACITY",
    "HOROVOD_TIMELINE", "HOROVOD_STALL_CHECK_TIME_SECONDS",
    "HOROVOD_STALL_SHUTDOWN_TIME_SECONDS", "HOROVOD_GLOO_TIMEOUT_SECONDS",
    "HOROVOD_START_TIMEOUT", "HOROVOD_LOG_LEVEL", "HOROVOD_RANK", "HOROVOD_SIZE",
    "HOROVOD_LOCAL_RANK", "HOROVOD_LOCAL_SIZE", "HOROVOD_HOSTNAME",
    "HOROVOD_TIMELINE_MARK_CYCLES", "HOROVOD_STALL_CHECK_DISABLE", "HOROVOD_AUTOTUNE",
    "HOROVOD_GLOO_RENDEZVOUS_ADDR", "HOROVOD_GLOO_RENDEZVOUS_PORT", "HOROVOD_CPU_OPERATIONS",
    "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
    "PMI_RANK", "PMI_SIZE", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID",
    "SLURM_JOB_NODELIST", "SLURM_JOB_ID", "RANK", "WORLD_SIZE", "LOCAL_RANK",
    "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT",
};
#define N_VARS (sizeof VARS / sizeof VARS[0])

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc;
  (void)argv;
  for (size_t i = 0; i < N_VARS; i++) unsetenv(VARS[i]);
  plait_log_set_level(PLAIT_LOG_ERROR + 1); /* the parsers' warnings are not findings */
  return 0;
}

static void small_parsers(const char *value) {
  uint64_t bytes;
  int flag, level;
  (void)plait_parse_size(value, &bytes);
  (void)plait_parse_bool(value, &flag);
  if (plait_parse_level(value, &level) == 0) (void)plait_level_name(level);
  char host[PLAIT_HOST_MAX];
  (void)plait_slurm_first_host(value, host, sizeof host);
  int clean;
  (void)plait_horovod_strtol(value, &clean);
  (void)plait_horovod_strtof(value, &clean);
}

/* The "VAR=value" line of var in a formatted configuration, as value. */
static int printed_value(const char *text, const char *var, char *out, size_t cap) {
  size_t len = strlen(var);
  for (const char *line = text; line && *line;) {
    const char *end = strchr(line, '\n');
    size_t n = end ? (size_t)(end - line) : strlen(line);
    if (n > len && !strncmp(line, var, len) && line[len] == '=') {
      snprintf(out, cap, "%.*s", (int)(n - len - 1), line + len + 1);
      return 0;
    }
    line = end ? end + 1 : NULL;
  }
  return -1;
}

/* What plait prints for var reads back as the same setting. (It found text
 * values with a line break, which printed as two settings: now refused.) */
static void check_reads_back(const char *var, const char *text) {
  char value[4096], again[16384];
  if (strncmp(var, "PLAIT_", 6) != 0 || !strcmp(var, "PLAIT_SECRET") ||
      printed_value(text, var, value, sizeof value) != 0)
    return;
  if (setenv(var, value, 1) != 0) return;
  plait_config_t cfg;
  plait_result_t rc = plait_config_load(&cfg);
  if (rc != PLAIT_SUCCESS) {
    fprintf(stderr, "fuzz_config: %s: what plait prints, '%s', is refused: %s\n", var, value,
            plait_last_error());
    __builtin_trap();
  }
  size_t needed = 0;
  rc = plait_config_format(&cfg, again, sizeof again, &needed);
  plait_config_free(&cfg);
  if (rc == PLAIT_SUCCESS && strcmp(text, again) != 0) {
    fprintf(stderr, "fuzz_config: %s: reading back the printed '%s' gives another "
            "setting:\n%s\n---\n%s\n", var, value, text, again);
    __builtin_trap();
  }
}

/* The whole configuration with var=value in the environment, as plait_init
 * reads it, then the topology the launcher variables give. */
static void load_with(const char *var, const char *value) {
  if (setenv(var, value, 1) != 0) return;
  plait_config_t cfg;
  if (plait_config_load(&cfg) == PLAIT_SUCCESS) {
    char text[16384];
    size_t needed = 0;
    plait_result_t rc = plait_config_format(&cfg, text, sizeof text, &needed);
    plait_topology_t topo;
    (void)plait_topology_from_env(&cfg, &topo);
    plait_config_free(&cfg);
    if (rc == PLAIT_SUCCESS) check_reads_back(var, text);
  }
  unsetenv(var);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1 || size > 4096) return 0;
  const char *var = VARS[data[0] % N_VARS];
  char *value = malloc(size);
  if (value == NULL) return 0;
  memcpy(value, data + 1, size - 1);
  value[size - 1] = '\0'; /* a value ends at its first NUL, as in environ */
  small_parsers(value);
  plait_config_t defaults;
  if (plait_config_load(&defaults) == PLAIT_SUCCESS) {
    (void)plait_config_parse_var(&defaults, var, value);
    plait_config_free(&defaults);
  }
  load_with(var, value);
  free(value);
  return 0;
}
