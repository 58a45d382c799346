/*
 * plaitrun: starts N local ranks of a plait job, or (elastic mode) is the
 * elastic driver of workers that come and go. See docs/plaitrun.md.
 */
#include "plaitrun/elastic/driver.h"
#include "horovod_flags.h"
#include "job.h"
#include "jobenv.h"
#include "options.h"
#include "remote.h"
#include "slurm.h"

#include <plait/plait.h>

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The ranks' pipes must not land on 0, 1 or 2: make sure those are open. */
static void ensure_std_fds(void) {
  for (int fd = 0; fd < 3; fd++) {
    if (fcntl(fd, F_GETFD) >= 0) continue;
    int opened = open("/dev/null", fd == 0 ? O_RDONLY : O_WRONLY);
    if (opened >= 0 && opened != fd) {
      dup2(opened, fd);
      close(opened);
    }
  }
}

/* After --help-env: which HOROVOD_* variables of this environment libplait
 * takes, and as what (the "# ..." lines that end plait_config_dump). */
static void print_horovod_notes(void) {
  size_t needed = 0;
  if (plait_config_dump(NULL, 0, &needed) != PLAIT_ERR_BUFFER_TOO_SMALL || needed == 0) return;
  char *dump = malloc(needed);
  if (dump == NULL || plait_config_dump(dump, needed, NULL) != PLAIT_SUCCESS) {
    free(dump);
    return;
  }
  int first = 1;
  for (char *line = dump; line && *line;) {
    char *end = strchr(line, '\n');
    if (end) *end = '\0';
    if (line[0] == '#') {
      if (first) printf("\nHorovod variables in this environment (docs/configuration.md):\n");
      printf("  %s\n", line + 2);
      first = 0;
    }
    line = end ? end + 1 : NULL;
  }
  free(dump);
}

static int print_help_env(void) {
  size_t needed = 0;
  plait_result_t rc = plait_config_help(NULL, 0, &needed);
  if ((rc != PLAIT_SUCCESS && rc != PLAIT_ERR_BUFFER_TOO_SMALL) || needed == 0) {
    fprintf(stderr, "plaitrun: cannot list the environment variables: %s: %s\n",
            plait_result_name(rc), plait_last_error());
    return PLAITRUN_EXIT_INTERNAL;
  }
  char *text = malloc(needed);
  if (text == NULL) {
    fprintf(stderr, "plaitrun: out of memory\n");
    return PLAITRUN_EXIT_INTERNAL;
  }
  rc = plait_config_help(text, needed, &needed);
  if (rc != PLAIT_SUCCESS) {
    fprintf(stderr, "plaitrun: cannot list the environment variables: %s: %s\n",
            plait_result_name(rc), plait_last_error());
    free(text);
    return PLAITRUN_EXIT_INTERNAL;
  }
  fputs(text, stdout);
  /* The plugins declare and check their own variables; the core does not
   * know them (docs/configuration.md lists them). */
  fputs("\nTransport plugins read their own variables and warn about unknown ones of\n"
        "their prefix when they start: PLAIT_OFI_* (the ofi plugin; listed in\n"
        "docs/configuration.md, \"Read by the ofi transport plugin\"). The gloo plugin\n"
        "reads none.\n", stdout);
  free(text);
  print_horovod_notes();
  return fflush(stdout) == 0 ? 0 : PLAITRUN_EXIT_INTERNAL;
}

static int print_version(void) {
  printf("plaitrun %s (libplait %s, ABI %u)\n", PLAIT_VERSION_STRING,
         plait_version_string(), plait_abi_version());
  return fflush(stdout) == 0 ? 0 : PLAITRUN_EXIT_INTERNAL;
}

int main(int argc, char **argv) {
  plaitrun_options_t opts;
  char err[512];
  if (plaitrun_parse_args(argc, argv, &opts, err, sizeof err) != 0) {
    fprintf(stderr, "plaitrun: %s\nTry 'plaitrun --help' for more information.\n", err);
    return PLAITRUN_EXIT_USAGE;
  }
  switch (opts.action) {
  case PLAITRUN_ACTION_HELP:
    plaitrun_print_usage(stdout);
    return fflush(stdout) == 0 ? 0 : PLAITRUN_EXIT_INTERNAL;
  case PLAITRUN_ACTION_HELP_ENV:
    return print_help_env();
  case PLAITRUN_ACTION_VERSION:
    return print_version();
  case PLAITRUN_ACTION_CHECK_BUILD:
    return plaitrun_print_check_build();
  case PLAITRUN_ACTION_RUN:
    break;
  }
  ensure_std_fds();
  if (plaitrun_horovod_apply_env(&opts, err, sizeof err) != 0) {
    fprintf(stderr, "plaitrun: %s\n", err);
    return PLAITRUN_EXIT_INTERNAL;
  }
  if (plaitrun_slurm_setup(&opts, err, sizeof err) != 0) { /* srun in an allocation */
    fprintf(stderr, "plaitrun: %s\n", err);
    return PLAITRUN_EXIT_USAGE;
  }
  if (opts.elastic) {
    if (plaitrun_jobenv_python(err, sizeof err) != 0) {
      fprintf(stderr, "plaitrun: %s\n", err);
      return PLAITRUN_EXIT_INTERNAL;
    }
    return plaitrun_elastic_run(&opts);
  }
  char rendezvous_host[PLAITRUN_HOST_NAME_MAX + 2];
  if (opts.remote && plaitrun_rendezvous_host(&opts, rendezvous_host, sizeof rendezvous_host,
                                              err, sizeof err) != 0) {
    fprintf(stderr, "plaitrun: %s\n", err);
    return PLAITRUN_EXIT_INTERNAL;
  }
  if (plaitrun_jobenv_prepare(opts.nranks, opts.remote ? rendezvous_host : NULL, err,
                              sizeof err) != 0) {
    fprintf(stderr, "plaitrun: %s\n", err);
    return PLAITRUN_EXIT_INTERNAL;
  }
  if (plaitrun_jobenv_python(err, sizeof err) != 0) {
    fprintf(stderr, "plaitrun: %s\n", err);
    return PLAITRUN_EXIT_INTERNAL;
  }
  return plaitrun_job_run(&opts);
}
