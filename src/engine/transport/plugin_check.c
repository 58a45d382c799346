/* Checking a plugin's table (plugin.h): the head of any version, and a
 * current table's name, memory space, allreduce flags, auto place and
 * functions. Its own file so that the loader (plugin.c) and the version-1
 * adapter (plugin_v1.c) both call it downward, not one back into the other. */
#include "engine/transport/plugin.h"

#include "util/error.h"

plait_result_t plait_plugin_check_head(const char *path, const char *symbol, uint32_t version,
                                       uint32_t size, uint32_t want, size_t min) {
  if (version != want)
    return plait_error(PLAIT_ERR_PLUGIN, "%s: %s has transport ABI version %u, this libplait "
                       "needs %u", path, symbol, version, want);
  if (size < min)
    return plait_error(PLAIT_ERR_PLUGIN, "%s: transport table is %u bytes, version %u needs at "
                       "least %zu", path, size, version, min);
  return PLAIT_SUCCESS;
}

plait_result_t plait_plugin_check_table(const plait_transport_t *t, const char *path) {
  PLAIT_CHECK(plait_plugin_check_head(path, PLAIT_TRANSPORT_SYMBOL, t->abi_version, t->struct_size,
                                      PLAIT_TRANSPORT_ABI_VERSION, PLAIT_TRANSPORT_MIN_SIZE));
  if (!t->name || !*t->name)
    return plait_error(PLAIT_ERR_PLUGIN, "%s: transport table has no name", path);
  if (!(t->caps & (PLAIT_CAP_HOST_MEMORY | PLAIT_CAP_DEVICE_MEMORY)))
    return plait_error(PLAIT_ERR_PLUGIN, "%s: transport '%s' declares no memory space", path,
                       t->name);
  if ((t->allreduce_flags & PLAIT_ALLREDUCE_SPANS) &&
      (!(t->allreduce_flags & PLAIT_ALLREDUCE_SCALED) || (t->caps & PLAIT_CAP_DEVICE_MEMORY)))
    return plait_error(PLAIT_ERR_PLUGIN, "%s: transport '%s' declares PLAIT_ALLREDUCE_SPANS "
                       "without PLAIT_ALLREDUCE_SCALED, or with device memory", path, t->name);
  if (t->auto_place < 0)
    return plait_error(PLAIT_ERR_PLUGIN, "%s: transport '%s' has auto_place %d (0: not a "
                       "candidate of auto; 1, 2, ...: its place)", path, t->name,
                       (int)t->auto_place);
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
