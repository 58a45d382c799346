/* Internal: finding, loading and checking transport plugins. */
#ifndef PLAIT_PLUGIN_H
#define PLAIT_PLUGIN_H

#include "plait/transport.h"

typedef struct plait_plugin {
  void *dl;                          /* dlopen handle */
  const plait_transport_t *table;    /* the plugin's table (adapted to current) */
  void *state;                       /* from table->init */
  char path[4096];                   /* the file that was loaded */
} plait_plugin_t;

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

/* The folders plait_plugin_load searches, in order, colon-separated into
 * buf (cap bytes): search_path's (may be NULL), then libplait.so's folder. */
void plait_plugin_folders(char *buf, size_t cap, const char *search_path);

/* Checks a table; exposed for tests. */
plait_result_t plait_plugin_check_table(const plait_transport_v1_t *t, const char *path);

#endif
