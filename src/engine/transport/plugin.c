/* Transport plugin loader: search path, dlopen, versioned symbol (the
 * checks of a table in plugin_check.c). */
#include "engine/transport/plugin.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util/error.h"
#include "util/log.h"

/* The folder that holds libplait.so (or the executable the core is linked into). */
static void own_folder(char *buf, size_t cap) {
  Dl_info info;
  buf[0] = '\0';
  if (!dladdr((void *)&plait_plugin_load, &info) || !info.dli_fname) return;
  /* dladdr names the main program without a folder: ask the kernel then. */
  char real[4096];
  if (strchr(info.dli_fname, '/')) {
    if (!realpath(info.dli_fname, real)) snprintf(real, sizeof real, "%s", info.dli_fname);
  } else {
    ssize_t n = readlink("/proc/self/exe", real, sizeof real - 1);
    real[n > 0 ? n : 0] = '\0';
  }
  snprintf(buf, cap, "%s", real);
  char *slash = strrchr(buf, '/');
  if (slash)
    *slash = '\0';
  else
    snprintf(buf, cap, ".");
}

void plait_plugin_dirs(const char *search_path, char *dirs, size_t cap) {
  char own[4096];
  own_folder(own, sizeof own);
  snprintf(dirs, cap, "%s%s%s", search_path ? search_path : "",
           search_path && *search_path ? ":" : "", own);
}

/* dlerror's text without the path it repeats. */
static const char *dl_text(const char *path, const char *e) {
  if (!e) return "cannot be loaded";
  size_t n = strlen(path);
  return !strncmp(e, path, n) && !strncmp(e + n, ": ", 2) ? e + n + 2 : e;
}

/* The newest versioned symbol the library exports: the current table as it
 * is, version 1 through its adapter (plugin_v1.c). */
static plait_result_t find_table(plait_plugin_t *p) {
  dlerror();
  const plait_transport_t *t = dlsym(p->dl, PLAIT_TRANSPORT_SYMBOL);
  if (t) {
    PLAIT_CHECK(plait_plugin_check_table(t, p->path));
    p->table = t;
    return PLAIT_SUCCESS;
  }
  const plait_transport_v1_t *v1 = dlsym(p->dl, PLAIT_TRANSPORT_SYMBOL_V1);
  if (v1) {
    PLAIT_CHECK(plait_plugin_adapt_v1(v1, p->path, &t, &p->adapter));
    p->table = t;
    plait_result_t rc = plait_plugin_check_table(t, p->path);
    if (rc) {
      plait_plugin_release_v1(p->adapter);
      p->adapter = NULL;
      p->table = NULL;
      return rc;
    }
    PLAIT_DEBUG("plugin", "%s: transport ABI version 1, served through the adapter", p->path);
    return PLAIT_SUCCESS;
  }
  const char *err = dlerror();
  return plait_error(PLAIT_ERR_PLUGIN, "%s does not export %s (nor %s): %s", p->path,
                     PLAIT_TRANSPORT_SYMBOL, PLAIT_TRANSPORT_SYMBOL_V1,
                     err ? dl_text(p->path, err) : "symbol not found");
}

static int valid_name(const char *name) {
  if (!*name || strlen(name) > 64) return 0;
  for (const char *c = name; *c; c++)
    if (!((*c >= 'a' && *c <= 'z') || (*c >= '0' && *c <= '9') || *c == '_')) return 0;
  return 1;
}

/* Appends "  path: why\n" to the report of what was tried. */
static void note(char *tried, size_t cap, const char *path, const char *why) {
  size_t used = strlen(tried);
  if (used < cap && snprintf(tried + used, cap - used, "\n  %s: %s", path, why) < 0)
    tried[used] = '\0';
}

plait_result_t plait_plugin_load(plait_plugin_t *p, const char *name, const char *search_path) {
  memset(p, 0, sizeof *p);
  if (!valid_name(name))
    return plait_error(PLAIT_ERR_PLUGIN, "transport name '%s' is not valid: use lowercase letters, "
                       "digits and '_'", name);
  char dirs[8192];
  plait_plugin_dirs(search_path, dirs, sizeof dirs);
  char tried[4096] = "";
  char *save = NULL;
  for (char *dir = strtok_r(dirs, ":", &save); dir; dir = strtok_r(NULL, ":", &save)) {
    snprintf(p->path, sizeof p->path, "%s/libplait-transport-%s.so", dir, name);
    dlerror();
    p->dl = dlopen(p->path, RTLD_NOW | RTLD_LOCAL);
    if (!p->dl) {
      const char *e = dl_text(p->path, dlerror());
      if (access(p->path, F_OK) == 0) { /* there, but not a library this process can load */
        char why[1024];
        snprintf(why, sizeof why, "skipped, it cannot be loaded: %s", e);
        PLAIT_INFO("plugin", "%s %s", p->path, why);
        note(tried, sizeof tried, p->path, why);
      } else {
        PLAIT_DEBUG("plugin", "%s: %s", p->path, e);
        note(tried, sizeof tried, p->path, e);
      }
      continue;
    }
    plait_result_t rc = find_table(p);
    if (rc) { /* a broken plugin is an error, not a reason to look further */
      dlclose(p->dl);
      p->dl = NULL;
      return rc;
    }
    PLAIT_DEBUG("plugin", "loaded transport '%s' from %s", p->table->name, p->path);
    return PLAIT_SUCCESS;
  }
  p->path[0] = '\0';
  return plait_error(PLAIT_ERR_PLUGIN, "transport plugin '%s' (PLAIT_TRANSPORT) not found; tried:%s"
                     "\n(set PLAIT_PLUGIN_PATH to the folder that holds "
                     "libplait-transport-%s.so)", name, tried, name);
}

plait_result_t plait_plugin_start(plait_plugin_t *p, const plait_transport_init_args_t *args) {
  void *state = NULL;
  plait_result_t rc = p->table->init(args, &state);
  if (rc) {
    const char *msg = p->table->last_error(NULL);
    return plait_error(rc, "transport '%s' failed to start: %s", p->table->name,
                       msg && *msg ? msg : plait_strerror(rc));
  }
  p->state = state;
  return PLAIT_SUCCESS;
}

void plait_plugin_unload(plait_plugin_t *p) {
  if (p->table && p->state) {
    if (p->table->finalize(p->state))
      PLAIT_WARN("plugin", "transport '%s' finalize: %s", p->table->name,
                 p->table->last_error(NULL));
  }
  plait_plugin_release_v1(p->adapter);
  if (p->dl) dlclose(p->dl);
  memset(p, 0, sizeof *p);
}
