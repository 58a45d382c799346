/*
 * Rank 0's admission of connections before they authenticate
 * (src/control/control_accept.c): idle connections held open by an outsider
 * must not keep the real ranks out, and a flood of connections that are
 * refused must not flood rank 0's log (issue 16: 64 held connections blocked
 * init until the start timeout; one warning per refusal grew a log by 130 MB
 * in 30 s).
 *
 * The outsider is the harness's last process: the job's PLAIT_SIZE is one
 * less, so it never calls plait_init. The "fixture" plugin and no coordinator
 * keep the ranks light.
 */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "api/core.h"
#include "plait/plait.h"
#include "ranks.h"

#define HELD 80          /* connections the outsider keeps open: more than rank 0's 64 slots */
#define FLOOD 2000       /* connections opened and closed at once */
#define MAX_LOG_LINES 20 /* what the flood may cost in rank 0's log */

typedef struct {
  atomic_int holding; /* the outsider holds its connections */
  atomic_int done;    /* the ranks have joined (or given up) */
  atomic_int log_lines, refused_total;
} shared_t;
static shared_t *sh;

static void setup(void) {
  plait_core_test_without_coordinator(1);
  sh = mmap(NULL, sizeof *sh, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  cr_assert(sh != MAP_FAILED);
  memset(sh, 0, sizeof *sh);
}
static void teardown(void) { munmap(sh, sizeof *sh); }
TestSuite(admission, .init = setup, .fini = teardown);

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* One TCP connection to the job's rendezvous; -1 when refused. */
static int connect_once(void) {
  const char *rv = getenv("PLAIT_RENDEZVOUS");
  struct sockaddr_in a = {.sin_family = AF_INET};
  a.sin_port = htons((uint16_t)atoi(strrchr(rv, ':') + 1));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd >= 0 && connect(fd, (struct sockaddr *)&a, sizeof a) == 0) return fd;
  if (fd >= 0) close(fd);
  return -1;
}

/* Waits (up to 10 s) until rank 0 listens. */
static int await_listener(void) {
  for (double until = now() + 10; now() < until; usleep(10000)) {
    int fd = connect_once();
    if (fd >= 0) {
      close(fd);
      return 0;
    }
  }
  return -1;
}

/* The outsider: keeps HELD idle connections open, opening a new one 200 ms
 * after rank 0 closes one, until the ranks are done (or 60 s). */
static int hold_connections(void) {
  if (await_listener()) return 1;
  int fds[HELD];
  double closed_at[HELD];
  for (int i = 0; i < HELD; i++) fds[i] = connect_once(), closed_at[i] = 0;
  atomic_store(&sh->holding, 1);
  for (double until = now() + 60; !atomic_load(&sh->done) && now() < until;) {
    struct pollfd p[HELD];
    for (int i = 0; i < HELD; i++) p[i] = (struct pollfd){fds[i], POLLIN, 0};
    poll(p, HELD, 50);
    for (int i = 0; i < HELD; i++) {
      char buf[512];
      if (fds[i] >= 0 && p[i].revents && read(fds[i], buf, sizeof buf) <= 0) {
        close(fds[i]);
        fds[i] = -1;
        closed_at[i] = now();
      }
      if (fds[i] < 0 && now() - closed_at[i] > 0.2) fds[i] = connect_once(), closed_at[i] = now();
    }
  }
  for (int i = 0; i < HELD; i++)
    if (fds[i] >= 0) close(fds[i]);
  return 0;
}

static int held_open(int rank, int n, void *arg) {
  (void)arg;
  if (rank == n - 1) return hold_connections();
  if (rank == 1)
    while (!atomic_load(&sh->holding)) usleep(1000);
  plait_result_t rc = plait_init();
  if (rc) plait_test_say(rank, "plait_init: %s: %s", plait_result_name(rc), plait_last_error());
  if (rank == 0) atomic_store(&sh->done, 1);
  if (!rc) plait_shutdown();
  return rc != PLAIT_SUCCESS;
}

/* Held idle connections are given up for a real rank at once; before, the
 * 64 slots stayed taken (each for 10 s, refilled at once) and init failed at
 * PLAIT_START_TIMEOUT_S. */
Test(admission, idle_connections_held_open_do_not_keep_ranks_out, .timeout = 120) {
  const char *env[] = {"PLAIT_TRANSPORT=fixture", "PLAIT_SIZE=2", "PLAIT_LOCAL_SIZE=2",
                       "PLAIT_START_TIMEOUT_S=20", NULL};
  plait_test_job_t job = {.nranks = 3, .timeout_s = 100, .env = env};
  cr_assert_eq(plait_test_run_ranks(&job, held_open, NULL), 0,
               "the ranks could not join past %d idle connections (messages above)", HELD);
}

/* Counts the lines of rank 0's log (a file) that tell of refused
 * connections, and the largest "N in all" total among them. */
static void count_refusals(FILE *f, int *lines, int *total) {
  char line[1024];
  *lines = 0, *total = 0;
  rewind(f);
  while (fgets(line, sizeof line, f)) {
    if (!strstr(line, "refused")) continue;
    (*lines)++;
    const char *paren = strstr(line, " in all");
    if (!paren) continue;
    const char *p = paren;
    while (p > line && p[-1] >= '0' && p[-1] <= '9') p--;
    int t = atoi(p);
    if (t > *total) *total = t;
  }
}

static int flood(int rank, int n, void *arg) {
  (void)n, (void)arg;
  if (rank == 1) {
    if (await_listener()) return 1;
    for (int i = 0; i < FLOOD; i++) {
      int fd = connect_once();
      if (fd >= 0 && i % 4 == 0) (void)!write(fd, "GET / HTTP/1.0\r\n\r\n", 18); /* garbage */
      if (fd >= 0) close(fd);
    }
  }
  FILE *log = NULL;
  int saved = -1;
  if (rank == 0) { /* rank 0's log goes to a file the test reads */
    log = tmpfile();
    if (!log) return 1;
    fflush(stderr);
    saved = dup(2);
    dup2(fileno(log), 2);
  }
  plait_result_t rc = plait_init();
  if (rank == 0) {
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    int lines, total;
    count_refusals(log, &lines, &total);
    fclose(log);
    atomic_store(&sh->log_lines, lines);
    atomic_store(&sh->refused_total, total);
  }
  if (rc) plait_test_say(rank, "plait_init: %s: %s", plait_result_name(rc), plait_last_error());
  if (!rc) plait_shutdown();
  return rc != PLAIT_SUCCESS;
}

/* FLOOD connections opened and closed (some sending garbage) cost rank 0 a
 * bounded number of log lines, and the count is still told. */
Test(admission, a_flood_of_refused_connections_logs_a_bounded_number_of_lines, .timeout = 120) {
  const char *env[] = {"PLAIT_TRANSPORT=fixture", "PLAIT_START_TIMEOUT_S=60", NULL};
  plait_test_job_t job = {.nranks = 2, .timeout_s = 100, .env = env};
  cr_assert_eq(plait_test_run_ranks(&job, flood, NULL), 0, "the job failed (messages above)");
  int lines = atomic_load(&sh->log_lines), total = atomic_load(&sh->refused_total);
  cr_log_info("%d connections refused, told in %d log lines", total, lines);
  cr_expect_leq(lines, MAX_LOG_LINES, "%d log lines for %d refused connections", lines, FLOOD);
  cr_expect_geq(total, FLOOD / 2, "the log does not count the refusals (largest total %d)", total);
}
