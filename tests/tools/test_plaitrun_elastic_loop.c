/*
 * plaitrun's elastic driver loop (src/plaitrun/elastic/driver.c, workers.c,
 * epoch.c) with real worker processes, against a test double of the
 * rendezvous server (tests/tools/elastic/rdv_double.c: plain text over TCP,
 * spoken by tests/tools/elastic/fake_worker.sh). What the real server adds
 * (authentication, the wire format) is lane rdv's tests'; the loop's rules
 * are these: epochs formed, a failure blacklisting its host and re-forming
 * with the survivors, hosts added and removed, --min-np with
 * --elastic-timeout, --reset-limit, a failing discovery script, Ctrl-C.
 */
#include <criterion/criterion.h>

#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "plaitrun/elastic/driver.h"
#include "plaitrun/options.h"

#define WORKER PLAIT_SOURCE_DIR "/tests/tools/elastic/fake_worker.sh"

typedef struct {
  char dir[64];
  char log[96];
  pid_t pid;
  int status;
} run_t;

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void write_hosts(const run_t *run, const char *text);
static int with_fake_ssh; /* start(): workers of other hosts through a fake ssh */

/* A fake ssh in the run's folder: logs its arguments to argv, skips its
 * options up to "--" and the host, and runs the remote command with sh
 * without PLAIT_SECRET (the secret must come on stdin). */
static void make_fake_ssh(const run_t *run) {
  char path[160];
  snprintf(path, sizeof path, "%s/fake_ssh", run->dir);
  FILE *f = fopen(path, "w");
  cr_assert_not_null(f);
  fprintf(f, "#!/bin/sh\nprintf '%%s\\n' \"$*\" >> %s/argv\n"
             "while [ \"$1\" != -- ]; do shift; done\nshift; shift\n"
             "exec env -u PLAIT_SECRET sh -c \"$1\"\n",
          run->dir);
  fclose(f);
  cr_assert_eq(chmod(path, 0755), 0);
}


/* Starts the driver in a child, in a folder of its own holding "hosts" (for
 * a discovery script "cat hosts"), its output in run->log, with args (then
 * the fake worker and the folder). */
static void start(run_t *run, const char *const *args, const char *hosts) {
  snprintf(run->dir, sizeof run->dir, "/tmp/plaitrun_elastic_XXXXXX");
  cr_assert_not_null(mkdtemp(run->dir));
  snprintf(run->log, sizeof run->log, "%s/log", run->dir);
  write_hosts(run, hosts);
  if (with_fake_ssh) make_fake_ssh(run);
  run->pid = fork();
  cr_assert_geq(run->pid, 0);
  if (run->pid > 0) return;
  if (chdir(run->dir) != 0) _exit(99);
  char ssh[160];
  snprintf(ssh, sizeof ssh, "%s/fake_ssh", run->dir);
  if (access(ssh, X_OK) == 0) setenv("PLAITRUN_SSH", ssh, 1);
  int fd = open(run->log, O_WRONLY | O_CREAT | O_TRUNC, 0600);
  dup2(fd, 1);
  dup2(fd, 2);
  setvbuf(stderr, NULL, _IONBF, 0);
  char *argv[32];
  int n = 0;
  argv[n++] = "plaitrun";
  for (int k = 0; args[k]; k++) argv[n++] = (char *)args[k];
  argv[n++] = WORKER;
  argv[n++] = run->dir;
  argv[n] = NULL;
  if (!with_fake_ssh) unsetenv("PLAIT_SECRET");
  plaitrun_options_t opts;
  char err[512];
  if (plaitrun_parse_args(n, argv, &opts, err, sizeof err) != 0) {
    fprintf(stderr, "usage: %s\n", err);
    _exit(2);
  }
  _exit(plaitrun_elastic_run(&opts));
}

static char *read_log(const run_t *run) {
  static char text[1 << 16];
  FILE *f = fopen(run->log, "r");
  size_t n = f ? fread(text, 1, sizeof text - 1, f) : 0;
  if (f) fclose(f);
  text[n] = '\0';
  return text;
}

/* (Criterion's message arguments run read_log again: test in one call.) */
static int log_has(const run_t *run, const char *text) {
  return strstr(read_log(run), text) != NULL;
}

static int count_of(const run_t *run, const char *text) {
  int n = 0;
  for (const char *p = read_log(run); (p = strstr(p, text)) != NULL; p++) n++;
  return n;
}

/* Waits (generously) until the log holds text n times. */
static void wait_for_n(const run_t *run, const char *text, int n) {
  double end = now_s() + 60;
  while (count_of(run, text) < n) {
    cr_assert(now_s() < end, "not %d '%s' in the driver's output:\n%s", n, text, read_log(run));
    usleep(50 * 1000);
  }
}

static void wait_for(const run_t *run, const char *text) { wait_for_n(run, text, 1); }

/* Waits for the driver to exit; returns its exit status. */
static int finish(run_t *run) {
  double end = now_s() + 60;
  while (waitpid(run->pid, &run->status, WNOHANG) == 0) {
    if (now_s() > end) {
      kill(run->pid, SIGKILL);
      waitpid(run->pid, &run->status, 0);
      cr_assert_fail("the driver did not exit:\n%s", read_log(run));
    }
    usleep(50 * 1000);
  }
  cr_assert(WIFEXITED(run->status), "driver killed:\n%s", read_log(run));
  return WEXITSTATUS(run->status);
}

static void touch(const run_t *run, const char *name) {
  char path[160];
  snprintf(path, sizeof path, "%s/%s", run->dir, name);
  FILE *f = fopen(path, "w");
  cr_assert_not_null(f);
  fclose(f);
}

static void write_hosts(const run_t *run, const char *text) {
  char path[160], tmp[170];
  snprintf(path, sizeof path, "%s/hosts", run->dir);
  snprintf(tmp, sizeof tmp, "%s.tmp", path);
  FILE *f = fopen(tmp, "w");
  cr_assert_not_null(f);
  fputs(text, f);
  fclose(f);
  rename(tmp, path);
}

static pid_t worker_pid(const run_t *run, const char *file) {
  char path[160];
  snprintf(path, sizeof path, "%s/%s", run->dir, file);
  FILE *f = fopen(path, "r");
  cr_assert_not_null(f, "no %s", path);
  int pid = 0;
  cr_assert_eq(fscanf(f, "%d", &pid), 1);
  fclose(f);
  return pid;
}

static void cleanup(run_t *run) {
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf %s", run->dir);
  cr_expect_eq(system(cmd), 0);
}

Test(elastic_loop, kill_9_of_one_worker_forms_epoch_2_with_the_3_others, .timeout = 120) {
  run_t run;
  start(&run, (const char *[]){"--min-np", "2", "--max-np", "4", "--host-discovery-script",
                               "printf '127.0.0.1:2\n127.0.0.2:2\n'", NULL}, "");
  wait_for(&run, "epoch 1 formed: 4 workers on 2 hosts (127.0.0.1:2 127.0.0.2:2)");
  wait_for(&run, "[3]: epoch 1 rank 3 size 4");
  kill(worker_pid(&run, "pid.127.0.0.2_1"), SIGKILL);
  wait_for(&run, "worker 127.0.0.2/1 (rank 3 of epoch 1) was killed by signal 9 (Killed): host "
                 "127.0.0.2 blacklisted for good");
  touch(&run, "broken.1");
  wait_for(&run, "epoch 2 formed: 3 workers on 2 hosts (127.0.0.1:2 127.0.0.2:1)");
  wait_for(&run, "[2]: epoch 2 rank 2 size 3");
  touch(&run, "done");
  cr_expect_eq(finish(&run), 0, "%s", read_log(&run));
  cr_expect(log_has(&run, "[127.0.0.1/0]: hello from 127.0.0.1/0"),
            "before its first epoch a worker's lines carry its name:\n%s",
                     read_log(&run));
  cleanup(&run);
}

Test(elastic_loop, added_host_joins_at_the_next_epoch_and_removed_host_leaves, .timeout = 120) {
  run_t run;
  start(&run, (const char *[]){"--min-np", "2", "--max-np", "4", "--host-discovery-script",
                               "cat hosts", NULL}, "127.0.0.1:2\n");
  wait_for(&run, "epoch 1 formed: 2 workers on 1 host (127.0.0.1:2)");
  write_hosts(&run, "127.0.0.1:2\n127.0.0.3:2\n");
  wait_for(&run, "host 127.0.0.3 added (2 slots)");
  /* The workers of epoch k ask for host updates once added.k exists, and
   * come back. An epoch does not wait for new workers: one of the new host's
   * that has not asked for its place yet when the others are back (a slow
   * start under load) joins at the next epoch, which the driver's ADDED
   * answer to the running workers' POLL starts. So the epoch with all 4 may
   * be epoch 2 or a later one; each earlier one has fewer. */
  const char *four = "formed: 4 workers on 2 hosts (127.0.0.1:2 127.0.0.3:2)";
  int k = 1;
  while (!log_has(&run, four)) {
    cr_assert_lt(k, 4, "no epoch with all 4 workers by epoch %d:\n%s", k, read_log(&run));
    char order[32], formed[32];
    snprintf(order, sizeof order, "added.%d", k);
    touch(&run, order);
    snprintf(formed, sizeof formed, "epoch %d formed: ", ++k);
    wait_for(&run, formed);
  }
  char four_at[96];
  snprintf(four_at, sizeof four_at, "epoch %d %s", k, four);
  cr_assert(log_has(&run, four_at), "all 4 formed, but not in the latest epoch %d:\n%s", k,
            read_log(&run));
  write_hosts(&run, "127.0.0.3:2\n");
  wait_for(&run, "host 127.0.0.1 removed from the host list");
  char removed_order[32], last[64];
  snprintf(removed_order, sizeof removed_order, "added.%d", k);
  touch(&run, removed_order);
  wait_for(&run, "worker 127.0.0.1/0 stopped: its host left the host list");
  snprintf(last, sizeof last, "epoch %d formed: 2 workers on 1 host (127.0.0.3:2)", k + 1);
  wait_for(&run, last);
  touch(&run, "done");
  cr_expect_eq(finish(&run), 0, "%s", read_log(&run));
  cleanup(&run);
}

Test(elastic_loop, below_min_np_for_the_elastic_timeout_fails_naming_it, .timeout = 120) {
  run_t run;
  start(&run, (const char *[]){"--min-np", "3", "--elastic-timeout", "2",
                               "--host-discovery-script", "cat hosts", NULL}, "127.0.0.1:2\n");
  cr_expect_eq(finish(&run), 1, "%s", read_log(&run));
  cr_expect(log_has(&run, "fewer than --min-np 3 slots for 2 seconds"), "%s",
                     read_log(&run));
  cleanup(&run);
}

Test(elastic_loop, survivors_below_min_np_form_a_job_when_workers_come_back, .timeout = 120) {
  /* Horovod #3494's schedule: below --min-np, then a host comes back */
  run_t run;
  start(&run, (const char *[]){"--min-np", "2", "--max-np", "2", "--host-discovery-script",
                               "cat hosts", NULL}, "127.0.0.1:1\n127.0.0.2:1\n");
  wait_for(&run, "epoch 1 formed: 2 workers on 2 hosts");
  kill(worker_pid(&run, "pid.127.0.0.2_0"), SIGKILL);
  touch(&run, "broken.1");
  wait_for(&run, "1 worker ready, below --min-np 2");
  write_hosts(&run, "127.0.0.1:1\n127.0.0.3:1\n");
  wait_for(&run, "epoch 2 formed: 2 workers on 2 hosts (127.0.0.1:1 127.0.0.3:1)");
  touch(&run, "done");
  cr_expect_eq(finish(&run), 0, "%s", read_log(&run));
  cleanup(&run);
}

Test(elastic_loop, straggler_killed_after_the_grace_and_its_host_back_after_cooldown,
     .timeout = 120) {
  run_t run;
  setenv("PLAIT_ELASTIC_JOIN_GRACE_S", "0.5", 1);
  start(&run, (const char *[]){"--min-np", "1", "--blacklist-cooldown-range", "1", "1",
                               "--host-discovery-script", "cat hosts", NULL}, "127.0.0.1:3\n");
  unsetenv("PLAIT_ELASTIC_JOIN_GRACE_S");
  wait_for(&run, "epoch 1 formed: 3 workers on 1 host (127.0.0.1:3)");
  touch(&run, "deaf.127.0.0.1_2");
  touch(&run, "broken.1");
  wait_for(&run, "worker 127.0.0.1/2 (rank 2 of epoch 1) did not come to re-form within 0.5 s "
                 "(PLAIT_ELASTIC_JOIN_GRACE_S): killed: host 127.0.0.1 blacklisted for 1 s");
  wait_for(&run, "epoch 2 formed: 2 workers on 1 host (127.0.0.1:2)");
  wait_for(&run, "host 127.0.0.1 back from the blacklist (cooldown over)");
  wait_for_n(&run, "[127.0.0.1/2]: hello from 127.0.0.1/2", 2); /* a new worker in the slot */
  touch(&run, "added.2");
  wait_for(&run, "epoch 3 formed: 3 workers on 1 host (127.0.0.1:3)");
  touch(&run, "done");
  cr_expect_eq(finish(&run), 0, "%s", read_log(&run));
  cleanup(&run);
}

Test(elastic_loop, reset_limit_ends_the_job_naming_it, .timeout = 120) {
  run_t run;
  start(&run, (const char *[]){"--min-np", "1", "--reset-limit", "0", "--host-discovery-script",
                               "cat hosts", NULL}, "127.0.0.1:2\n");
  wait_for(&run, "epoch 1 formed: 2 workers");
  kill(worker_pid(&run, "pid.127.0.0.1_1"), SIGKILL);
  touch(&run, "broken.1");
  cr_expect_eq(finish(&run), 1, "%s", read_log(&run));
  cr_expect(log_has(&run, "the job was reset 0 times: --reset-limit 0 reached"),
                     "%s", read_log(&run));
  cr_expect(log_has(&run, "stopped: the job was reset 0 times"),
                     "the survivor's JOIN is answered STOP with the reason:\n%s", read_log(&run));
  cleanup(&run);
}

Test(elastic_loop, discovery_script_failing_at_the_start_fails_the_job, .timeout = 60) {
  run_t run;
  start(&run, (const char *[]){"--min-np", "1", "--host-discovery-script",
                               "echo boom >&2; exit 3", NULL}, "");
  cr_expect_eq(finish(&run), 1, "%s", read_log(&run));
  cr_expect(log_has(&run, "the discovery script 'echo boom >&2; exit 3' "
                            "failed: exit status 3; its stderr: boom"), "%s", read_log(&run));
  cleanup(&run);
}

Test(elastic_loop, discovery_failing_later_keeps_the_last_list_and_warns_once, .timeout = 120) {
  run_t run;
  start(&run, (const char *[]){"--min-np", "1", "--host-discovery-script", "cat hosts", NULL},
        "127.0.0.1:1\n");
  wait_for(&run, "epoch 1 formed: 1 worker on 1 host");
  write_hosts(&run, "not a host\n");
  wait_for(&run, "warning: the discovery script 'cat hosts' failed: line 1 'not a host'");
  write_hosts(&run, "127.0.0.1:1\n");
  wait_for(&run, "the discovery script works again");
  touch(&run, "done");
  cr_expect_eq(finish(&run), 0, "%s", read_log(&run));
  const char *log = read_log(&run);
  const char *first = strstr(log, "warning: the discovery script");
  cr_expect_null(strstr(first + 1, "warning: the discovery script"), "warned twice:\n%s", log);
  cleanup(&run);
}

Test(elastic_loop, other_hosts_get_workers_over_ssh_with_the_secret_on_stdin, .timeout = 120) {
  run_t run;
  with_fake_ssh = 1;
  setenv("PLAIT_SECRET", "0123456789abcdef0123456789abcdef", 1);
  start(&run, (const char *[]){"--min-np", "2", "--host-discovery-script", "cat hosts", NULL},
        "127.0.0.1:1\nnode-b:1\n");
  wait_for(&run, "epoch 1 formed: 2 workers on 2 hosts (127.0.0.1:1 node-b:1)");
  wait_for(&run, "[node-b/0]: hello from node-b/0 secret 0123");
  touch(&run, "done");
  cr_expect_eq(finish(&run), 0, "%s", read_log(&run));
  char path[160];
  snprintf(path, sizeof path, "%s/argv", run.dir);
  FILE *f = fopen(path, "r");
  cr_assert_not_null(f);
  char argv_log[8192];
  size_t n = fread(argv_log, 1, sizeof argv_log - 1, f);
  fclose(f);
  argv_log[n] = '\0';
  cr_expect(strstr(argv_log, "-T -o BatchMode=yes -- node-b ") != NULL, "%s", argv_log);
  cr_expect(strstr(argv_log, "PLAIT_ELASTIC_WORKER=node-b/0 PLAIT_ELASTIC_DRIVER=") != NULL,
            "%s", argv_log);
  cr_expect(strstr(argv_log, "0123456789abcdef") == NULL, "the secret is on ssh's command line");
  cleanup(&run);
}

Test(elastic_loop, discovery_failing_for_the_elastic_timeout_fails_naming_the_script,
     .timeout = 120) {
  run_t run;
  start(&run, (const char *[]){"--min-np", "2", "--slots-per-host", "2", "--elastic-timeout",
                               "2", "--host-discovery-script", "cat hosts", NULL},
        "127.0.0.1\n"); /* no ":slots": --slots-per-host */
  wait_for(&run, "epoch 1 formed: 2 workers on 1 host (127.0.0.1:2)");
  write_hosts(&run, "127.0.0.1:zero\n");
  cr_expect_eq(finish(&run), 1, "%s", read_log(&run));
  cr_expect(log_has(&run, "the discovery script 'cat hosts' failed for 2 s (--elastic-timeout); "
                          "last: line 1 '127.0.0.1:zero': the slots 'zero'"),
            "%s", read_log(&run));
  cleanup(&run);
}

Test(elastic_loop, sigint_is_forwarded_and_exits_130, .timeout = 60) {
  run_t run;
  start(&run, (const char *[]){"--min-np", "2", "-H", "localhost:2", NULL}, "");
  wait_for(&run, "epoch 1 formed: 2 workers on 1 host (localhost:2)");
  kill(run.pid, SIGINT);
  cr_expect_eq(finish(&run), 130, "%s", read_log(&run));
  cr_expect(log_has(&run, "got SIGINT; forwarding it to the workers"), "%s",
                     read_log(&run));
  cleanup(&run);
}
