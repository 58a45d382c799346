/*
 * PLAIT_THREAD_AFFINITY and Horovod's HOROVOD_THREAD_AFFINITY, in real
 * ranks: each rank's coordinator thread ("plait-coord" in
 * /proc/self/task/<tid>/comm) runs on the CPU at its local rank, and only
 * that thread; without the variable it is not pinned; a list one rank
 * cannot use fails plait_init on every rank, naming the variable, at once.
 */
#include <criterion/criterion.h>
#include <dirent.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ops_util.h"
#include "plait/plait.h"
#include "ranks.h"

/* The Cpus_allowed_list line of a /proc status file ("" when it has none). */
static void cpus_allowed(const char *status, char *out, size_t cap) {
  out[0] = '\0';
  FILE *f = fopen(status, "r");
  if (!f) return;
  char line[512];
  while (fgets(line, sizeof line, f))
    if (!strncmp(line, "Cpus_allowed_list:", 18)) {
      const char *v = line + 18;
      while (*v == ' ' || *v == '\t') v++;
      size_t len = strcspn(v, "\n");
      if (len >= cap) len = cap - 1;
      memcpy(out, v, len);
      out[len] = '\0';
    }
  fclose(f);
}

/* The Cpus_allowed_list of the coordinator thread ("" when none is found). */
static void coordinator_cpus(char *out, size_t cap) {
  out[0] = '\0';
  DIR *d = opendir("/proc/self/task");
  if (!d) return;
  struct dirent *de;
  while ((de = readdir(d))) {
    if (de->d_name[0] == '.') continue;
    char path[320], comm[64] = "";
    snprintf(path, sizeof path, "/proc/self/task/%s/comm", de->d_name);
    FILE *f = fopen(path, "r");
    if (!f) continue;
    if (!fgets(comm, sizeof comm, f)) comm[0] = '\0';
    fclose(f);
    if (strcmp(comm, "plait-coord\n")) continue;
    snprintf(path, sizeof path, "/proc/self/task/%s/status", de->d_name);
    cpus_allowed(path, out, cap);
    break;
  }
  closedir(d);
}

/* The first and the last CPU this process may run on. */
static void two_cpus(int *a, int *b) {
  cpu_set_t s;
  CPU_ZERO(&s);
  cr_assert_eq(sched_getaffinity(0, sizeof s, &s), 0);
  *a = *b = -1;
  for (int c = 0; c < CPU_SETSIZE; c++)
    if (CPU_ISSET(c, &s)) {
      if (*a < 0) *a = c;
      *b = c;
    }
  cr_assert_geq(*a, 0);
}

typedef struct {
  int cpu[2];     /* what each rank's coordinator must run on; -1: not pinned */
  char all[256];  /* this process's Cpus_allowed_list (the unpinned value) */
} want_t;

static int pinned(int rank, int n, void *arg) {
  want_t *w = arg;
  cpu_set_t before, after;
  CPU_ZERO(&before);
  CPU_ZERO(&after);
  CHECK(sched_getaffinity(0, sizeof before, &before) == 0, "sched_getaffinity");
  OK(plait_init());
  char got[256], want[256];
  coordinator_cpus(got, sizeof got);
  if (w->cpu[rank] >= 0) snprintf(want, sizeof want, "%d", w->cpu[rank]);
  else snprintf(want, sizeof want, "%s", w->all);
  CHECK(!strcmp(got, want), "the coordinator thread may run on '%s', expected '%s'", got, want);
  CHECK(sched_getaffinity(0, sizeof after, &after) == 0 && CPU_EQUAL(&before, &after),
        "the calling thread's CPUs changed");
  float x[4] = {1, 1, 1, 1};
  plait_tensor_t t;
  plait_handle_t *h;
  OK(plait_tensor_1d(&t, x, 4, PLAIT_FLOAT32));
  OK(plait_allreduce_async("pinned", &t, &t, PLAIT_OP_SUM, NULL, &h));
  OK(plait_wait(h, 60));
  plait_release(h);
  CHECK(x[3] == (float)n, "x[3] = %g", x[3]);
  OK(plait_shutdown());
  return 0;
}

static void run_pinned(const char *var) {
  plait_test_clear_env();
  want_t w;
  two_cpus(&w.cpu[1], &w.cpu[0]); /* rank 0 on the last CPU, rank 1 on the first */
  cpus_allowed("/proc/self/status", w.all, sizeof w.all);
  char value[96];
  snprintf(value, sizeof value, "%s= %d , %d", var, w.cpu[0], w.cpu[1]);
  const char *env[] = {value, NULL};
  plait_test_job_t job = {.nranks = 2, .timeout_s = 100, .env = env};
  cr_assert_eq(plait_test_run_ranks(&job, pinned, &w), 0, "%s", value);
}

Test(thread_affinity, each_rank_pins_its_coordinator_to_its_local_rank_cpu, .timeout = 120) {
  run_pinned("PLAIT_THREAD_AFFINITY");
}

Test(thread_affinity, horovod_thread_affinity_is_taken, .timeout = 120) {
  run_pinned("HOROVOD_THREAD_AFFINITY");
}

Test(thread_affinity, without_the_variable_the_coordinator_is_not_pinned, .timeout = 120) {
  plait_test_clear_env();
  want_t w = {.cpu = {-1, -1}};
  cpus_allowed("/proc/self/status", w.all, sizeof w.all);
  plait_test_job_t job = {.nranks = 2, .timeout_s = 100};
  cr_assert_eq(plait_test_run_ranks(&job, pinned, &w), 0);
}

/* Rank `bad` has a list too short for the job; the others a good one. */
static int one_bad(int rank, int n, void *arg) {
  int bad = *(int *)arg;
  (void)n;
  setenv("PLAIT_THREAD_AFFINITY", rank == bad ? "0" : "0,0", 1);
  plait_result_t rc = plait_init();
  const char *msg = plait_last_error();
  CHECK(rc == PLAIT_ERR_CONFIG, "plait_init -> %s: %s", plait_result_name(rc), msg);
  CHECK(strstr(msg, "PLAIT_THREAD_AFFINITY='0': 1 CPU id for 2 ranks on this host"), "%s", msg);
  if (rank != bad) {
    char who[32];
    snprintf(who, sizeof who, "rank %d", bad);
    CHECK(strstr(msg, who), "'%s' is not named: %s", who, msg);
  }
  return 0;
}

Test(thread_affinity, a_list_one_rank_cannot_use_fails_every_rank_naming_it, .timeout = 120) {
  for (int bad = 0; bad < 2; bad++) {
    plait_test_clear_env();
    plait_test_job_t job = {.nranks = 2, .timeout_s = 100};
    cr_assert_eq(plait_test_run_ranks(&job, one_bad, &bad), 0, "bad rank %d", bad);
  }
}
