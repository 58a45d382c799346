/* Internal: finding, loading and checking transport plugins. */
#ifndef PLAIT_PLUGIN_H
#define PLAIT_PLUGIN_H

#include "plait/transport.h"

typedef struct plait_plugin {
  void *dl;                          /* dlopen handle */
  const plait_transport_t *table;    /* the plugin's table (adapted to current) */
  void *state;                       /* from table->init */
  void *adapter;                     /* a v1 plugin's adapter slot (plugin_v1.c), or NULL */
  char path[4096];                   /* the file that was loaded */
} plait_plugin_t;

/* The folders plugins are looked for in, colon-separated into dirs:
 * search_path's (may be NULL), then the folder of libplait.so. */
void plait_plugin_dirs(const char *search_path, char *dirs, size_t cap);

/* Loads libplait-transport-<name>.so from each folder of search_path
 * (colon-separated, may be NULL) and then the folder of libplait.so, and
 * checks its table. PLAIT_ERR_PLUGIN names every path tried with dlerror's
 * text, or what is wrong with the table. */
plait_result_t plait_plugin_load(plait_plugin_t *p, const char *name, const char *search_path);

/* Calls the plugin's init; on failure returns PLAIT_ERR_PLUGIN... with the
 * plugin's own code and message. */
plait_result_t plait_plugin_start(plait_plugin_t *p, const plait_transport_init_args_t *args);

/* Finalizes (when started) and unloads. Safe on a zeroed struct. */
void plait_plugin_unload(plait_plugin_t *p);

/* ---- Checking a table (plugin_check.c). */

/* Checks a table's head, any version: its abi_version is want and its
 * struct_size at least min; PLAIT_ERR_PLUGIN naming path and symbol. */
plait_result_t plait_plugin_check_head(const char *path, const char *symbol, uint32_t version,
                                       uint32_t size, uint32_t want, size_t min);

/* Checks a current table; exposed for tests. */
plait_result_t plait_plugin_check_table(const plait_transport_t *t, const char *path);

/* ---- The adapter of version 1 (plugin_v1.c). */
/* Checks v1's header fields (version, size), then serves it as the current
 * table *out (checked by the caller), held in *slot until released. */
plait_result_t plait_plugin_adapt_v1(const plait_transport_v1_t *v1, const char *path,
                                     const plait_transport_t **out, void **slot);
plait_result_t plait_plugin_check_table_v1(const plait_transport_v1_t *t, const char *path);
/* Frees an adapter slot; NULL does nothing. */
void plait_plugin_release_v1(void *slot);

#endif
