#include "ranks.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int bind_loopback_port(int want) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return -1;
  struct sockaddr_in a;
  memset(&a, 0, sizeof a);
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons((unsigned short)want);
  socklen_t len = sizeof a;
  int port = -1;
  if (bind(fd, (struct sockaddr *)&a, sizeof a) == 0 &&
      getsockname(fd, (struct sockaddr *)&a, &len) == 0)
    port = ntohs(a.sin_port);
  close(fd);
  return port;
}

/* A free port below the kernel's ephemeral range (10000-32767 as Linux sets
 * it), as plaitrun picks: a port from that range may become some outgoing
 * connection's local port before rank 0 binds it. */
int plait_test_free_port(void) {
  unsigned seed = (unsigned)getpid() ^ (unsigned)(now_s() * 1e6);
  for (int attempt = 0; attempt < 64; attempt++) {
    int port = bind_loopback_port(10000 + (int)(rand_r(&seed) % 22000));
    if (port > 0) return port;
  }
  return bind_loopback_port(0);
}

extern char **environ;

static int is_job_var(const char *e, size_t len) {
  /* The harness's own settings (PLAIT_TEST_TRANSPORT) are not the job's. */
  if (!strncmp(e, "PLAIT_TEST_", 11)) return 0;
  static const char *prefixes[] = {"PLAIT_", "OMPI_", "PMI_", "PMIX_", "SLURM_", "HOROVOD_"};
  static const char *exact[] = {"MPI_LOCALRANKID", "MPI_LOCALNRANKS", "RANK", "WORLD_SIZE",
                                "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT",
                                "GROUP_RANK", "TORCHELASTIC_USE_AGENT_STORE"};
  for (size_t i = 0; i < sizeof prefixes / sizeof prefixes[0]; i++)
    if (!strncmp(e, prefixes[i], strlen(prefixes[i]))) return 1;
  for (size_t i = 0; i < sizeof exact / sizeof exact[0]; i++)
    if (strlen(exact[i]) == len && !strncmp(e, exact[i], len)) return 1;
  return 0;
}

void plait_test_clear_env(void) {
  char names[512][128]; /* collected first: unsetenv edits environ */
  size_t n = 0;
  for (char **e = environ; e && *e && n < 512; e++) {
    size_t len = strcspn(*e, "=");
    if (len >= sizeof names[0] || !is_job_var(*e, len)) continue;
    memcpy(names[n], *e, len);
    names[n++][len] = '\0';
  }
  for (size_t i = 0; i < n; i++) unsetenv(names[i]);
}

void plait_test_set_plugin_path(void) {
  setenv("PLAIT_PLUGIN_PATH", PLAIT_TEST_LIB_DIR ":" PLAIT_TEST_PLUGIN_DIR, 1);
}

int plait_test_stderr_to(const char *dir, int rank) {
  char path[4096];
  snprintf(path, sizeof path, "%s/rank%d.log", dir, rank);
  int fd = open(path, O_CREAT | O_TRUNC | O_WRONLY, 0600), saved = dup(2);
  if (fd < 0 || saved < 0 || dup2(fd, 2) < 0) {
    if (fd >= 0) close(fd);
    if (saved >= 0) close(saved);
    return -1;
  }
  close(fd);
  return saved;
}

void plait_test_stderr_back(int saved) {
  fflush(stderr);
  dup2(saved, 2);
  close(saved);
}

void plait_test_say(int rank, const char *fmt, ...) {
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  fprintf(stderr, "[test rank %d] %s\n", rank, msg);
}

void plait_test_make_secret(char out[65]) {
  unsigned char raw[32];
  FILE *f = fopen("/dev/urandom", "rb");
  if (!f || fread(raw, 1, sizeof raw, f) != sizeof raw) {
    for (size_t i = 0; i < sizeof raw; i++) raw[i] = (unsigned char)rand();
  }
  if (f) fclose(f);
  for (size_t i = 0; i < sizeof raw; i++) sprintf(out + 2 * i, "%02x", raw[i]);
  out[64] = '\0';
}

/* libfabric's shm provider keeps each endpoint's region in /dev/shm/<pid>:...
 * and removes it when the endpoint closes; a rank killed (or _exit()ing)
 * before that leaves it behind. */
void plait_test_remove_shm_regions(pid_t pid) {
  if (pid <= 0) return;
  DIR *d = opendir("/dev/shm");
  if (!d) return;
  char prefix[32];
  int len = snprintf(prefix, sizeof prefix, "%d:", (int)pid);
  struct dirent *e;
  while ((e = readdir(d)) != NULL) {
    if (strncmp(e->d_name, prefix, (size_t)len) != 0) continue;
    char path[512];
    snprintf(path, sizeof path, "/dev/shm/%s", e->d_name);
    unlink(path);
  }
  closedir(d);
}

int plait_test_run_ranks(plait_test_job_t *job, plait_test_rank_fn fn, void *arg) {
  int n = job->nranks;
  if (n < 1 || n > PLAIT_TEST_MAX_RANKS) return 1;
  if (job->timeout_s <= 0) job->timeout_s = 60;
  int port = plait_test_free_port();
  snprintf(job->rendezvous, sizeof job->rendezvous, "127.0.0.1:%d", port);
  plait_test_make_secret(job->secret);
  fflush(stdout);
  fflush(stderr);

  pid_t pids[PLAIT_TEST_MAX_RANKS], pids_all[PLAIT_TEST_MAX_RANKS];
  double start = now_s();
  for (int r = 0; r < n; r++) {
    pid_t pid = fork();
    if (pid == 0) {
      char buf[32];
      snprintf(buf, sizeof buf, "%d", r);
      setenv("PLAIT_RANK", buf, 1);
      setenv("PLAIT_LOCAL_RANK", buf, 1);
      snprintf(buf, sizeof buf, "%d", n);
      setenv("PLAIT_SIZE", buf, 1);
      setenv("PLAIT_LOCAL_SIZE", buf, 1);
      setenv("PLAIT_RENDEZVOUS", job->rendezvous, 1);
      setenv("PLAIT_SECRET", job->secret, 1);
      plait_test_set_plugin_path();
      /* The suites run on gloo (written when it was the default), and ctest
       * re-runs some on another transport (tests/CMakeLists.txt); a job's own
       * env still wins. */
      const char *tr = getenv("PLAIT_TEST_TRANSPORT");
      setenv("PLAIT_TRANSPORT", tr && *tr ? tr : "gloo", 1);
      for (const char **e = job->env; e && *e; e++) putenv(strdup(*e));
      int rc = fn(r, n, arg);
      fflush(stdout);
      fflush(stderr);
      _exit(rc);
    }
    pids[r] = pids_all[r] = pid;
    job->status[r] = -1;
    job->exit_code[r] = -1;
    job->elapsed_s[r] = -1;
  }

  int left = n;
  while (left > 0) {
    int any = 0;
    for (int r = 0; r < n; r++) {
      if (pids[r] <= 0) continue;
      int st;
      pid_t w = waitpid(pids[r], &st, WNOHANG);
      if (w == pids[r]) {
        job->status[r] = st;
        job->exit_code[r] = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
        job->elapsed_s[r] = now_s() - start;
        pids[r] = 0;
        left--;
        any = 1;
      }
    }
    if (left == 0) break;
    if (now_s() - start > job->timeout_s) {
      for (int r = 0; r < n; r++)
        if (pids[r] > 0) {
          fprintf(stderr, "[test] rank %d still running after %.1f s: killed\n", r,
                  job->timeout_s);
          kill(pids[r], SIGKILL);
          waitpid(pids[r], NULL, 0);
          pids[r] = 0;
        }
      break;
    }
    if (!any) usleep(2000);
  }

  for (int r = 0; r < n; r++) plait_test_remove_shm_regions(pids_all[r]);
  int fails = 0;
  for (int r = 0; r < n; r++) {
    if (job->exit_code[r] != 0) {
      fails++;
      if (job->status[r] != -1 && WIFSIGNALED(job->status[r]))
        fprintf(stderr, "[test] rank %d died of signal %d\n", r, WTERMSIG(job->status[r]));
      else
        fprintf(stderr, "[test] rank %d exited with %d\n", r, job->exit_code[r]);
    }
  }
  return fails ? 1 : 0;
}
