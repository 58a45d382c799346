/* Transport plugin loader: search path, dlopen, versioned symbol, checks. */
#include "engine/plugin.h"

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

/* dlerror's text without the path it repeats. */
static const char *dl_text(const char *path, const char *e) {
  if (!e) return "cannot be loaded";
  size_t n = strlen(path);
  return !strncmp(e, path, n) && !strncmp(e + n, ": ", 2) ? e + n + 2 : e;
}

/* Adapters from each known ABI version to the current one, newest first.
 * Version 1 is the current one, so it needs no adapter. */
typedef struct {
  const char *symbol;
  unsigned version;
} abi_entry_t;
static const abi_entry_t abi_versions[] = {{PLAIT_TRANSPORT_SYMBOL_V1, 1}};

plait_result_t plait_plugin_check_table(const plait_transport_v1_t *t, const char *path) {
  if (t->abi_version != PLAIT_TRANSPORT_ABI_VERSION)
    return plait_error(PLAIT_ERR_PLUGIN, "%s: transport ABI version %u, this libplait needs %u",
                       path, t->abi_version, PLAIT_TRANSPORT_ABI_VERSION);
  if (t->struct_size < PLAIT_TRANSPORT_V1_MIN_SIZE)
    return plait_error(PLAIT_ERR_PLUGIN, "%s: transport table is %u bytes, version %u needs at "
                       "least %zu", path, t->struct_size, t->abi_version,
                       (size_t)PLAIT_TRANSPORT_V1_MIN_SIZE);
  if (!t->name || !*t->name)
    return plait_error(PLAIT_ERR_PLUGIN, "%s: transport table has no name", path);
  if (!(t->caps & (PLAIT_CAP_HOST_MEMORY | PLAIT_CAP_DEVICE_MEMORY)))
    return plait_error(PLAIT_ERR_PLUGIN, "%s: transport '%s' declares no memory space", path,
                       t->name);
  const struct {
    const void *fn;
    const char *name;
  } fns[] = {
#define F(f) {(const void *)t->f, #f}
      F(init), F(finalize), F(last_error), F(allreduce), F(allgatherv), F(broadcast),
      F(alltoallv), F(reducescatter), F(barrier), F(mem_alloc), F(mem_free), F(mem_copy)
#undef F
  };
  for (size_t i = 0; i < sizeof fns / sizeof fns[0]; i++)
    if (!fns[i].fn)
      return plait_error(PLAIT_ERR_PLUGIN, "%s: transport '%s' leaves %s() NULL", path, t->name,
                         fns[i].name);
  return PLAIT_SUCCESS;
}

/* Finds the newest versioned symbol the library exports. */
static plait_result_t find_table(plait_plugin_t *p) {
  for (size_t i = 0; i < sizeof abi_versions / sizeof abi_versions[0]; i++) {
    const plait_transport_v1_t *t = dlsym(p->dl, abi_versions[i].symbol);
    if (t) {
      PLAIT_CHECK(plait_plugin_check_table(t, p->path));
      p->table = t;
      return PLAIT_SUCCESS;
    }
  }
  const char *err = dlerror();
  return plait_error(PLAIT_ERR_PLUGIN, "%s does not export %s: %s", p->path,
                     PLAIT_TRANSPORT_SYMBOL_V1, err ? dl_text(p->path, err) : "symbol not found");
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
  char own[4096];
  own_folder(own, sizeof own);
  snprintf(dirs, sizeof dirs, "%s%s%s", search_path ? search_path : "",
           search_path && *search_path ? ":" : "", own);
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
  if (p->dl) dlclose(p->dl);
  memset(p, 0, sizeof *p);
}

void plait_plugin_folders(char *buf, size_t cap, const char *search_path) {
  char own[4096];
  own_folder(own, sizeof own);
  snprintf(buf, cap, "%s%s%s", search_path ? search_path : "",
           search_path && *search_path ? ":" : "", own);
}
