/*
 * libFuzzer harness: plaitrun's command line (options.c and horovodrun's
 * flags, horovod_flags.c). The input is NUL-separated fields: the first is
 * written to the file "f" in an empty working folder made for the run (so
 * "--hostfile f" parses fuzzed host files), the others are argv[1..]. Fields
 * that contain '/' are dropped, so that no input names a file outside that
 * folder (/dev/stdin would block). plaitrun_parse_args must accept or refuse
 * with a message, never crash, leak or read past an argument; what it
 * accepts must describe a job that can start (check_accepted). Run with
 * ci/fuzz; seeds in tests/fuzz/corpus/plaitrun_args.
 */
#include "options.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX_ARGS 64

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

static char g_file[64]; /* the fuzzed file's path */

/* At exit: the file and its folder go (libFuzzer ends with exit()). */
static void remove_file(void) {
  unlink(g_file);
  char *slash = strrchr(g_file, '/');
  if (slash) *slash = '\0';
  rmdir(g_file);
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc;
  (void)argv;
  char dir[] = "/tmp/plait-fuzz-args-XXXXXX";
  if (mkdtemp(dir) == NULL) {
    perror("fuzz_plaitrun_args: cannot make its folder");
    return 1;
  }
  snprintf(g_file, sizeof g_file, "%s/f", dir);
  atexit(remove_file);
  return 0;
}

static void write_file(const char *text, size_t len) {
  FILE *f = fopen(g_file, "w");
  if (f == NULL) return;
  fwrite(text, 1, len, f);
  fclose(f);
}

/* What a command line plaitrun accepts promises the job: a rank count in
 * range, a command, and hosts (when given) with the slots for every rank and
 * names ssh cannot take for options. */
static void check_accepted(const plaitrun_options_t *o) {
  if (o->nranks < 1 || o->nranks > PLAITRUN_MAX_RANKS || !o->command || !o->command[0])
    __builtin_trap();
  int slots = 0;
  for (int h = 0; h < o->n_hosts; h++) {
    const char *name = o->hosts[h].name;
    if (!name[0] || name[0] == '-' || strpbrk(name, " \t\n'\"$;|&<>`\\") ||
        o->hosts[h].slots < 1)
      __builtin_trap();
    slots += o->hosts[h].slots;
  }
  if (o->n_hosts > 0 && (slots != o->slots || slots < o->nranks)) __builtin_trap();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size > 8192) return 0;
  char *copy = malloc(size + 1);
  if (copy == NULL) return 0;
  memcpy(copy, data, size);
  copy[size] = '\0';
  char *argv[MAX_ARGS + 2];
  int argc = 0;
  argv[argc++] = "plaitrun";
  size_t first_len = strlen(copy);
  write_file(copy, first_len);
  for (size_t at = first_len + 1; at < size && argc <= MAX_ARGS;) {
    char *field = copy + at;
    size_t len = strlen(field);
    if (strcmp(field, "f") == 0)
      argv[argc++] = g_file;
    else if (strchr(field, '/') == NULL)
      argv[argc++] = field;
    at += len + 1;
  }
  argv[argc] = NULL;
  plaitrun_options_t opts;
  char err[512];
  err[0] = '\0';
  if (plaitrun_parse_args(argc, argv, &opts, err, sizeof err) != 0) {
    if (memchr(err, '\0', sizeof err) == NULL || err[0] == '\0')
      __builtin_trap(); /* a refusal says why, in a terminated string */
  } else if (opts.action == PLAITRUN_ACTION_RUN) {
    check_accepted(&opts);
  }
  free(copy);
  return 0;
}
