/*
 * plaitrun inside a Slurm allocation (src/plaitrun/slurm.c): Slurm's per-node
 * counts, when srun takes over from ssh (and when a user's choice wins), and
 * the srun command a rank gets. The real srun/salloc runs are
 * tests/tools/slurm/run.sh's.
 */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "plaitrun/options.h"
#include "plaitrun/remote.h"
#include "plaitrun/slurm.h"

static void clear_env(void) {
  const char *vars[] = {"SLURM_JOB_ID", "SLURM_JOB_NODELIST", "SLURM_TASKS_PER_NODE",
                        "SLURM_NTASKS_PER_NODE", "SLURM_JOB_CPUS_PER_NODE", "PLAITRUN_AGENT",
                        "PLAITRUN_SSH"};
  for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) unsetenv(vars[i]);
}

TestSuite(plaitrun_slurm, .init = clear_env);

Test(plaitrun_slurm, counts_read_slurms_repeat_form) {
  int c[8];
  cr_assert_eq(plaitrun_slurm_counts("2", c, 8), 1);
  cr_expect_eq(c[0], 2);
  cr_assert_eq(plaitrun_slurm_counts("2(x3),1", c, 8), 4);
  cr_expect(c[0] == 2 && c[1] == 2 && c[2] == 2 && c[3] == 1);
  cr_assert_eq(plaitrun_slurm_counts("4,1(x2),16", c, 8), 4);
  cr_expect(c[0] == 4 && c[1] == 1 && c[2] == 1 && c[3] == 16);
  const char *bad[] = {"", "x", "0", "-1", "2(x", "2(3)", "2(x0)", "2,", ",2", "2(x2)x", "2 ",
                       "1(x9)", "99999999999"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
    cr_expect_eq(plaitrun_slurm_counts(bad[i], c, 8), -1, "'%s' was read", bad[i]);
}

/* -np 2 -H a:1,b:1 cmd, parsed as plaitrun does (o->command points into argv). */
static void parse(plaitrun_options_t *o) {
  static char *argv[] = {"plaitrun", "-np", "2", "-H", "nodea:1,nodeb:1", "true", NULL};
  char err[256];
  cr_assert_eq(plaitrun_parse_args(6, argv, o, err, sizeof err), 0, "%s", err);
}

Test(plaitrun_slurm, outside_an_allocation_or_with_the_users_choice_ssh_stays) {
  plaitrun_options_t o;
  char err[256];
  parse(&o);
  cr_assert_eq(plaitrun_slurm_setup(&o, err, sizeof err), 0);
  cr_expect_null(plaitrun_slurm_srun(), "srun without SLURM_JOB_ID");
  setenv("SLURM_JOB_ID", "7", 1);
  setenv("PLAITRUN_SSH", "ssh -F /dev/null", 1);
  cr_assert_eq(plaitrun_slurm_setup(&o, err, sizeof err), 0);
  cr_expect_null(plaitrun_slurm_srun(), "srun although PLAITRUN_SSH was set");
  unsetenv("PLAITRUN_SSH");
  setenv("PLAITRUN_AGENT", "my-agent", 1);
  cr_assert_eq(plaitrun_slurm_setup(&o, err, sizeof err), 0);
  cr_expect_null(plaitrun_slurm_srun(), "srun although PLAITRUN_AGENT was set");
  unsetenv("PLAITRUN_AGENT");
  setenv("PATH", "/nonexistent", 1);
  cr_assert_eq(plaitrun_slurm_setup(&o, err, sizeof err), 0);
  cr_expect_null(plaitrun_slurm_srun(), "srun though none is on the PATH");
}

Test(plaitrun_slurm, in_an_allocation_every_rank_is_one_srun_task_on_its_host) {
  char dir[] = "/tmp/plait-srun-XXXXXX", path[64], err[256];
  cr_assert_not_null(mkdtemp(dir));
  snprintf(path, sizeof path, "%s/srun", dir); /* any executable named srun: only its path is used */
  FILE *f = fopen(path, "w");
  cr_assert_not_null(f);
  fputs("#!/bin/sh\nexit 0\n", f);
  fclose(f);
  chmod(path, 0755);
  setenv("PATH", dir, 1);
  setenv("SLURM_JOB_ID", "7", 1);
  plaitrun_options_t o;
  parse(&o);
  cr_assert_eq(plaitrun_slurm_setup(&o, err, sizeof err), 0, "%s", err);
  cr_assert_str_eq(plaitrun_slurm_srun(), path);
  cr_expect_eq(plaitrun_remote_start(1), 1, "this host's rank not through srun");
  cr_expect_str_eq(plaitrun_remote_via(), "srun");
  char **argv = plaitrun_remote_argv(&o, 1, 1, 0, 1, err, sizeof err);
  cr_assert_not_null(argv, "%s", err);
  const char *want[] = {path, "--nodes=1", "--ntasks=1", "--nodelist=nodeb", "--overlap",
                        "--kill-on-bad-exit=1", "--input=all", "--quiet", "--job-name=plaitrun",
                        "sh", "-c"};
  size_t i = 0;
  for (; i < sizeof want / sizeof want[0]; i++)
    cr_expect_str_eq(argv[i], want[i], "word %zu", i);
  cr_expect(argv[i] && strstr(argv[i], "PLAIT_RANK=1") && strstr(argv[i], "read -r PLAIT_SECRET"),
            "REMOTE: %s", argv[i] ? argv[i] : "(none)");
  cr_expect(argv[i] && !argv[i + 1], "words after REMOTE");
  plaitrun_remote_argv_free(argv);
  unlink(path);
  rmdir(dir);
}
