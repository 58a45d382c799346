/* plaitrun --check-build: what this plait has, in horovodrun --check-build's
 * layout ("Horovod v0.28.1:", "Available Frameworks:", four-space "[X] ..."
 * rows), with where each library was found: the framework adapters and the
 * transport plugins beside the libplait this plaitrun loaded (a build tree's
 * lib/, an installed libdir or a pip install's plait/_lib), or in
 * PLAIT_PLUGIN_PATH for the plugins. */
#include "horovod_flags.h"

#include <plait/plait.h>

#include <dlfcn.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The folder of libplait (where plugins are looked up last), without ".." or links. */
static int lib_dir(char *out, size_t cap) {
  Dl_info info;
  if (!dladdr((void *)plait_version_string, &info) || !info.dli_fname) return -1;
  char real[PATH_MAX];
  snprintf(out, cap, "%s", realpath(info.dli_fname, real) ? real : info.dli_fname);
  char *slash = strrchr(out, '/');
  if (!slash) return -1;
  *slash = '\0';
  return 0;
}

/* file (a name) in PLAIT_PLUGIN_PATH's folders (with_path) or libplait's folder. */
static int lib_found(const char *file, int with_path, char *where, size_t cap) {
  char dirs[8192] = "";
  const char *pp = with_path ? getenv("PLAIT_PLUGIN_PATH") : NULL;
  if (pp) snprintf(dirs, sizeof dirs, "%s:", pp);
  char lib[4096];
  if (lib_dir(lib, sizeof lib) == 0) strncat(dirs, lib, sizeof dirs - strlen(dirs) - 1);
  char *save = NULL;
  for (char *d = strtok_r(dirs, ":", &save); d; d = strtok_r(NULL, ":", &save)) {
    snprintf(where, cap, "%s/%s", d, file);
    if (access(where, R_OK) == 0) return 1;
  }
  return 0;
}

static void row(const char *label, const char *file, int with_path, const char *absent) {
  char where[8300];
  int found = file != NULL && lib_found(file, with_path, where, sizeof where);
  if (found)
    printf("    [X] %s: %s\n", label, where);
  else
    printf("    [ ] %s%s\n", label, absent ? absent : "");
}

int plaitrun_print_check_build(void) {
  printf("plait v%s:\n\n", plait_version_string());
  printf("Available Frameworks:\n");
  row("TensorFlow", "libplait_tensorflow.so", 0, " (no adapter beside libplait)");
  printf("    [X] PyTorch: plait.torch (pure Python; torch must be importable by the ranks)\n");
  row("MXNet", "libplait_mxnet.so", 0, " (no adapter beside libplait)");
  printf("\nAvailable Controllers:\n");
  printf("    [ ] MPI\n    [ ] Gloo\n");
  printf("    [X] plait: its own authenticated TCP control plane\n");
  printf("\nAvailable Tensor Operations:\n");
  row("NCCL", "libplait-transport-nccl.so", 1, NULL);
  printf("    [ ] DDL\n    [ ] CCL\n    [ ] MPI\n");
  row("Gloo", "libplait-transport-gloo.so", 1, NULL);
  row("libfabric (ofi)", "libplait-transport-ofi.so", 1, NULL);
  char lib[4096];
  printf("\nlibplait %s: %s/\n", plait_version_string(),
         lib_dir(lib, sizeof lib) == 0 ? lib : "(not found by dladdr)");
  return fflush(stdout) == 0 ? 0 : PLAITRUN_EXIT_INTERNAL;
}
