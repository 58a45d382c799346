/* The public transport queries that need no running engine:
 * plait_transport_query and plait_transport_list (include/plait/plait.h),
 * over the engine's plugin loader (engine/plugin.h), so the bindings never
 * load a plugin themselves. */
#include <dirent.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/transport/plugin.h"
#include "util/error.h"

/* The variable plait_init reads for its plugin search path
 * (util/config_table.h, plugin_path). */
#define PLUGIN_PATH_VARIABLE "PLAIT_PLUGIN_PATH"
#define PREFIX "libplait-transport-"
#define SUFFIX ".so"

typedef int (*version_fn_t)(int *version);

PLAIT_API plait_result_t plait_transport_query(const char *name, const char *version_symbol,
                                               plait_transport_info_t *info) {
  if (!name || !info)
    return plait_error(PLAIT_ERR_INVALID_ARGUMENT, "plait_transport_query: %s is NULL",
                       name ? "info" : "name");
  size_t size = info->struct_size;
  if (size < PLAIT_TRANSPORT_INFO_SIZE_V1)
    return plait_error(PLAIT_ERR_INVALID_ARGUMENT, "plait_transport_query: info->struct_size is "
                       "%zu; set it to sizeof(plait_transport_info_t) = %zu", size,
                       sizeof(plait_transport_info_t));
  plait_transport_info_t out;
  memset(&out, 0, sizeof out);
  plait_plugin_t p;
  if (plait_plugin_load(&p, name, getenv(PLUGIN_PATH_VARIABLE)) == PLAIT_SUCCESS) {
    out.found = 1;
    out.caps = p.table->caps;
    out.host_memory = (p.table->caps & PLAIT_CAP_HOST_MEMORY) != 0;
    out.device_memory = (p.table->caps & PLAIT_CAP_DEVICE_MEMORY) != 0;
    snprintf(out.path, sizeof out.path, "%s", p.path);
    version_fn_t fn = NULL;
    if (version_symbol && *version_symbol) {
      void *sym = dlsym(p.dl, version_symbol);
      memcpy(&fn, &sym, sizeof fn); /* object to function pointer, as POSIX allows */
    }
    int v = 0;
    if (fn && fn(&v) == 0 && v > 0) out.library_version = v;
    plait_plugin_unload(&p);
  }
  out.struct_size = size;
  memcpy(info, &out, size < sizeof out ? size : sizeof out);
  return PLAIT_SUCCESS;
}

/* Whether file is libplait-transport-<name>.so; *len gets name's length. */
static int plugin_file(const char *file, size_t *len) {
  size_t n = strlen(file), pre = strlen(PREFIX), suf = strlen(SUFFIX);
  if (n <= pre + suf || strncmp(file, PREFIX, pre) || strcmp(file + n - suf, SUFFIX)) return 0;
  *len = n - pre - suf;
  return 1;
}

static int by_name(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Collects the plugin names of folder into names (count, cap 256). */
static void scan(const char *folder, char **names, size_t *count) {
  DIR *d = opendir(folder);
  if (!d) return;
  for (struct dirent *ent = readdir(d); ent && *count < 256; ent = readdir(d)) {
    size_t len;
    if (!plugin_file(ent->d_name, &len)) continue;
    char *n = strndup(ent->d_name + strlen(PREFIX), len);
    if (n) names[(*count)++] = n;
  }
  closedir(d);
}

PLAIT_API plait_result_t plait_transport_list(char *buf, size_t buf_size, size_t *needed) {
  if (!buf && buf_size)
    return plait_error(PLAIT_ERR_INVALID_ARGUMENT,
                       "plait_transport_list: buf is NULL but buf_size is %zu", buf_size);
  char folders[8192];
  plait_plugin_dirs(getenv(PLUGIN_PATH_VARIABLE), folders, sizeof folders);
  char *names[256];
  size_t count = 0;
  char *save = NULL;
  for (char *dir = strtok_r(folders, ":", &save); dir; dir = strtok_r(NULL, ":", &save))
    scan(dir, names, &count);
  qsort(names, count, sizeof names[0], by_name);
  size_t used = 0;
  for (size_t i = 0; i < count; i++) {
    if (i && !strcmp(names[i], names[i - 1])) continue;
    size_t room = used < buf_size ? buf_size - used : 0;
    int n = snprintf(room ? buf + used : NULL, room, "%s\n", names[i]);
    if (n > 0) used += (size_t)n;
  }
  for (size_t i = 0; i < count; i++) free(names[i]);
  if (needed) *needed = used + 1;
  if (used + 1 > buf_size) {
    if (buf_size) buf[buf_size - 1] = '\0';
    return plait_error(PLAIT_ERR_BUFFER_TOO_SMALL, "plait_transport_list: buffer of %zu bytes "
                       "is too small: %zu needed", buf_size, used + 1);
  }
  if (!count) buf[0] = '\0';
  return PLAIT_SUCCESS;
}
