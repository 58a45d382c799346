#include "job.h"

#include "jobenv.h"
#include "linebuf.h"
#include "remote.h"
#include "signals.h"
#include "spawn.h"
#include "util/eintr.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

typedef enum phase { PHASE_RUNNING, PHASE_STOPPING, PHASE_KILLED } phase_t;

typedef struct rank_proc {
  pid_t pid;                   /* 0 until started */
  int running;                 /* started and not yet reaped */
  int fds[2];                  /* read ends for stdout, stderr; -1 when closed */
  int files[2];                /* --output-filename: where they go; -1 when none */
  plaitrun_linebuf_t lines[2]; /* to plaitrun's stdout, stderr */
  const char *host;            /* another host (started over ssh); NULL: this one */
  int stdin_w;                 /* over ssh: the write end of its stdin; -1 none */
} rank_proc_t;

typedef struct job {
  const plaitrun_options_t *opts;
  int nranks;
  int running;  /* ranks started and not yet reaped */
  int open_fds; /* pipe read ends not yet at EOF */
  rank_proc_t *ranks;
  struct pollfd *pfds; /* 2 * nranks */
  int *pfd_owner;      /* rank * 2 + stream for each pfds entry */
  phase_t phase;
  double kill_at;    /* STOPPING: when to send SIGKILL */
  double give_up_at; /* KILLED: when to stop waiting for the ranks */
  double drain_at;   /* no rank running: when to stop reading pipes; 0 unset */
  int exit_code;     /* -1 until the first cause of a stop */
  int abandoned;     /* stop waiting now */
  struct rlimit child_nofile;
  int devnull;
} job_t;

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Sends signo to everything rank r started: its process group, and the rank
 * itself should it have left that group. */
static void signal_rank(rank_proc_t *r, int signo) {
  if (r->pid <= 0 || (!r->running && r->fds[0] < 0 && r->fds[1] < 0)) return;
  kill(-r->pid, signo);
  if (r->running && getpgid(r->pid) != r->pid) kill(r->pid, signo);
}

static void signal_all(job_t *job, int signo) {
  for (int i = 0; i < job->nranks; i++) signal_rank(&job->ranks[i], signo);
}

/* A rank over ssh: its end of input tells the remote wrapper to stop it. */
static void close_stdin(rank_proc_t *r) {
  if (r->stdin_w >= 0) close(r->stdin_w);
  r->stdin_w = -1;
}

/* First cause of a stop: fix the exit status and signal the ranks. */
static void job_stop(job_t *job, int exit_code, int signo) {
  if (job->exit_code < 0) job->exit_code = exit_code;
  if (job->phase != PHASE_RUNNING) return;
  for (int i = 0; i < job->nranks; i++) close_stdin(&job->ranks[i]);
  job->phase = PHASE_STOPPING;
  job->kill_at = now_s() + job->opts->grace_s;
  signal_all(job, signo);
}

static void job_kill_all(job_t *job) {
  job->phase = PHASE_KILLED;
  job->give_up_at = now_s() + PLAITRUN_ABANDON_S;
  signal_all(job, SIGKILL);
}

static void on_forwarded_signal(job_t *job, int signo) {
  if (job->phase == PHASE_RUNNING) {
    if (job->running > 0)
      fprintf(stderr, "plaitrun: got %s; forwarding it to the ranks\n", plaitrun_signal_name(signo));
    job_stop(job, 128 + signo, signo);
  } else if (job->phase == PHASE_STOPPING) {
    if (job->exit_code < 0) job->exit_code = 128 + signo;
    if (job->running > 0)
      fprintf(stderr, "plaitrun: got %s again; killing the ranks\n", plaitrun_signal_name(signo));
    job_kill_all(job);
  }
}

static int status_to_exit_code(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return PLAITRUN_EXIT_INTERNAL;
}

static void report_failure(const job_t *job, int rank, int status) {
  const char *rest = job->running > 0 ? "; stopping the other ranks" : "";
  const char *host = job->ranks[rank].host;
  if (WIFEXITED(status) && host) {
    const char *via = plaitrun_remote_via();
    fprintf(stderr, "plaitrun: rank %d (on %s, over %s) exited with status %d%s%s\n", rank,
            host, via, WEXITSTATUS(status),
            WEXITSTATUS(status) == 255 && !strcmp(via, "ssh")
                ? " (ssh's status when it cannot connect, or when the remote side is gone)" : "",
            rest);
  } else if (WIFEXITED(status)) {
    fprintf(stderr, "plaitrun: rank %d exited with status %d%s\n", rank,
            WEXITSTATUS(status), rest);
  } else if (WIFSIGNALED(status)) {
    int sig = WTERMSIG(status);
    fprintf(stderr, "plaitrun: rank %d was killed by signal %d (%s)%s%s\n", rank, sig,
            strsignal(sig), WCOREDUMP(status) ? " (core dumped)" : "", rest);
  }
}

static rank_proc_t *find_rank(job_t *job, pid_t pid, int *index) {
  for (int i = 0; i < job->nranks; i++) {
    if (job->ranks[i].pid == pid) {
      *index = i;
      return &job->ranks[i];
    }
  }
  return NULL;
}

/* Reaps every rank that has exited; the first failure stops the job. */
static void job_reap(job_t *job) {
  for (;;) {
    int status = 0;
    pid_t pid = waitpid(-1, &status, WNOHANG);
    if (pid <= 0) break;
    int index = -1;
    rank_proc_t *r = find_rank(job, pid, &index);
    if (r == NULL || !r->running) continue;
    r->running = 0;
    close_stdin(r);
    job->running--;
    int failed = !WIFEXITED(status) || WEXITSTATUS(status) != 0;
    if (failed && job->phase == PHASE_RUNNING) {
      report_failure(job, index, status);
      job_stop(job, status_to_exit_code(status), SIGTERM);
    }
  }
  if (job->running == 0 && job->drain_at == 0) job->drain_at = now_s() + PLAITRUN_DRAIN_S;
}

static void close_stream(job_t *job, rank_proc_t *r, int stream) {
  plaitrun_linebuf_finish(&r->lines[stream]);
  close(r->fds[stream]);
  r->fds[stream] = -1;
  job->open_fds--;
}

/* Reads what one pipe has; at EOF flushes its partial line and closes it.
 * Returns 1 when it read something. */
static int pump(job_t *job, int owner) {
  static char chunk[PLAITRUN_LINE_MAX];
  rank_proc_t *r = &job->ranks[owner / 2];
  int stream = owner % 2;
  ssize_t n;
  PLAIT_RETRY_EINTR(n, read(r->fds[stream], chunk, sizeof chunk));
  if (n > 0) {
    plaitrun_linebuf_feed(&r->lines[stream], chunk, (size_t)n);
    return 1;
  }
  if (n == 0 || errno != EAGAIN) close_stream(job, r, stream);
  return 0;
}

/* Reads whatever is left in every open pipe without waiting, then closes. */
static void drain_and_close_all(job_t *job) {
  for (int i = 0; i < job->nranks; i++) {
    rank_proc_t *r = &job->ranks[i];
    for (int s = 0; s < 2; s++) {
      if (r->fds[s] < 0) continue;
      fcntl(r->fds[s], F_SETFL, fcntl(r->fds[s], F_GETFL) | O_NONBLOCK);
      while (pump(job, i * 2 + s)) {
      }
      if (r->fds[s] >= 0) close_stream(job, r, s);
    }
  }
}

static void check_deadlines(job_t *job) {
  double now = now_s();
  if (job->phase == PHASE_STOPPING && now >= job->kill_at) {
    if (job->running > 0)
      fprintf(stderr, "plaitrun: %d rank(s) still running %.1f s after being told to "
              "stop; sending SIGKILL\n", job->running, job->opts->grace_s);
    job_kill_all(job);
  }
  if (job->phase == PHASE_KILLED && job->running > 0 && now >= job->give_up_at) {
    fprintf(stderr, "plaitrun: %d rank(s) did not exit after SIGKILL; giving up on "
            "them\n", job->running);
    job->abandoned = 1;
  }
  if (job->running == 0 && job->open_fds > 0 && now >= job->drain_at)
    drain_and_close_all(job);
}

/* The ppoll timeout until the next deadline; NULL when there is none. */
static struct timespec *next_timeout(const job_t *job, struct timespec *ts) {
  double next = -1;
  if (job->phase == PHASE_STOPPING) next = job->kill_at;
  if (job->phase == PHASE_KILLED && job->running > 0) next = job->give_up_at;
  if (job->running == 0 && (next < 0 || job->drain_at < next)) next = job->drain_at;
  if (next < 0) return NULL;
  double left = next - now_s();
  if (left < 0) left = 0;
  ts->tv_sec = (time_t)left;
  ts->tv_nsec = (long)((left - (double)ts->tv_sec) * 1e9);
  return ts;
}

static int collect_pollfds(job_t *job) {
  int k = 0;
  for (int i = 0; i < job->nranks; i++) {
    for (int s = 0; s < 2; s++) {
      if (job->ranks[i].fds[s] < 0) continue;
      job->pfds[k] = (struct pollfd){.fd = job->ranks[i].fds[s], .events = POLLIN};
      job->pfd_owner[k] = i * 2 + s;
      k++;
    }
  }
  return k;
}

static void job_loop(job_t *job) {
  while (!job->abandoned && (job->running > 0 || job->open_fds > 0)) {
    int k = collect_pollfds(job);
    struct timespec ts;
    int ready = ppoll(job->pfds, (nfds_t)k, next_timeout(job, &ts),
                      plaitrun_signals_poll_mask());
    if (ready < 0 && errno != EINTR) {
      fprintf(stderr, "plaitrun: poll: %s; stopping the ranks\n", strerror(errno));
      job_stop(job, PLAITRUN_EXIT_INTERNAL, SIGTERM);
      job_kill_all(job);
      job->abandoned = 1;
      break;
    }
    int signo;
    while ((signo = plaitrun_signals_take_forward()) != 0) on_forwarded_signal(job, signo);
    plaitrun_signals_take_child();
    job_reap(job);
    for (int i = 0; ready > 0 && i < k; i++)
      if (job->pfds[i].revents != 0) pump(job, job->pfd_owner[i]);
    check_deadlines(job);
  }
}

/* Raises the soft RLIMIT_NOFILE enough for 2 pipes per rank; the ranks get
 * the original limit back. */
static int raise_fd_limit(job_t *job) {
  struct rlimit lim;
  if (getrlimit(RLIMIT_NOFILE, &lim) != 0) return 0;
  job->child_nofile = lim;
  rlim_t need = (rlim_t)job->nranks * 3 + 32;
  if (lim.rlim_cur != RLIM_INFINITY && lim.rlim_cur >= need) return 0;
  if (lim.rlim_cur == RLIM_INFINITY) return 0;
  if (lim.rlim_max != RLIM_INFINITY && lim.rlim_max < need) {
    fprintf(stderr, "plaitrun: -np %d needs %llu open files but the limit is %llu "
            "(raise it with ulimit -n)\n", job->nranks, (unsigned long long)need,
            (unsigned long long)lim.rlim_max);
    return -1;
  }
  lim.rlim_cur = need;
  if (setrlimit(RLIMIT_NOFILE, &lim) != 0) {
    fprintf(stderr, "plaitrun: -np %d needs %llu open files: setrlimit: %s\n",
            job->nranks, (unsigned long long)need, strerror(errno));
    return -1;
  }
  return 0;
}

/* Over ssh: the secret as the first line of the rank's stdin (never on a
 * command line); the pipe stays open until the job stops. */
static void send_secret(rank_proc_t *r, int fd) {
  plaitrun_remote_send_secret(fd);
  r->stdin_w = fd;
}

static int start_one(job_t *job, int i) {
  char err[256];
  const plaitrun_options_t *o = job->opts;
  int host, local_rank, local_size, in[2] = {-1, -1};
  plaitrun_place(o, i, &host, &local_rank, &local_size);
  int remote = host >= 0 && plaitrun_remote_start(o->hosts[host].local);
  int stdin_fd = (i == 0 && !isatty(STDIN_FILENO)) ? STDIN_FILENO : job->devnull;
  char **argv = o->command;
  if (remote) {
    argv = plaitrun_remote_argv(o, host, i, local_rank, local_size, err, sizeof err);
    if (argv == NULL || pipe2(in, O_CLOEXEC) != 0) {
      if (argv != NULL) snprintf(err, sizeof err, "cannot start rank %d: pipe: %s", i,
                                 strerror(errno));
      plaitrun_remote_argv_free(argv);
      fprintf(stderr, "plaitrun: %s%s\n", err, job->running ? "; stopping the other ranks" : "");
      job_stop(job, PLAITRUN_EXIT_INTERNAL, SIGTERM);
      return -1;
    }
    stdin_fd = in[0];
  }
  plaitrun_spawn_spec_t spec = {i, local_rank, local_size, argv, stdin_fd, &job->child_nofile,
                               NULL, NULL};
  plaitrun_child_t child;
  int rc = plaitrun_spawn_rank(&spec, &child, err, sizeof err);
  if (rc > 0)
    fprintf(stderr, "plaitrun: cannot run '%s' (rank %d): %s%s\n", argv[0], i, strerror(rc),
            job->running ? "; stopping the other ranks" : "");
  if (remote) {
    close(in[0]);
    plaitrun_remote_argv_free(argv);
    if (rc != 0) close(in[1]);
  }
  if (rc < 0)
    fprintf(stderr, "plaitrun: %s%s\n", err, job->running ? "; stopping the other ranks" : "");
  if (rc != 0) {
    job_stop(job, rc < 0 ? PLAITRUN_EXIT_INTERNAL : rc == ENOENT ? 127 : 126, SIGTERM);
    return -1;
  }
  rank_proc_t *r = &job->ranks[i];
  r->pid = child.pid;
  r->running = 1;
  r->fds[0] = child.out_fd;
  r->fds[1] = child.err_fd;
  if (remote) {
    r->host = o->hosts[host].name;
    send_secret(r, in[1]);
  }
  job->running++;
  job->open_fds += 2;
  return 0;
}

static void start_ranks(job_t *job) {
  fflush(stdout);
  fflush(stderr);
  for (int i = 0; i < job->nranks; i++) {
    if (plaitrun_signals_forward_pending()) return; /* handled in the loop */
    if (start_one(job, i) != 0) return;
  }
}

/* mkdir -p: each folder of path, then path itself. */
static int make_dirs(char *path) {
  for (char *p = path + 1;; p++) {
    if (*p != '/' && *p != '\0') continue;
    char saved = *p;
    *p = '\0';
    int rc = mkdir(path, 0777);
    *p = saved;
    if (rc != 0 && errno != EEXIST) return -1;
    if (saved == '\0') return 0;
  }
}

/* --output-filename DIR: the rank's output goes to DIR/rank.<r>/stdout and
 * stderr, r padded with zeros to the width of the last rank, as horovodrun
 * lays them out. */
static int open_output_files(const char *dir, int rank, int nranks, int files[2]) {
  char path[4096];
  int width = snprintf(NULL, 0, "%d", nranks - 1);
  if (snprintf(path, sizeof path, "%s/rank.%0*d", dir, width, rank) >= (int)sizeof path - 8) {
    fprintf(stderr, "plaitrun: --output-filename %s: the path is too long\n", dir);
    return -1;
  }
  if (make_dirs(path) != 0) {
    fprintf(stderr, "plaitrun: --output-filename: cannot create %s: %s\n", path, strerror(errno));
    return -1;
  }
  size_t base = strlen(path);
  static const char *names[2] = {"/stdout", "/stderr"};
  for (int s = 0; s < 2; s++) {
    snprintf(path + base, sizeof path - base, "%s", names[s]);
    files[s] = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
    if (files[s] < 0) {
      fprintf(stderr, "plaitrun: --output-filename: cannot open %s: %s\n", path,
              strerror(errno));
      return -1;
    }
  }
  return 0;
}

static int job_init(job_t *job, const plaitrun_options_t *opts) {
  memset(job, 0, sizeof *job);
  job->opts = opts;
  job->nranks = opts->nranks;
  job->exit_code = -1;
  job->devnull = -1;
  job->ranks = calloc((size_t)job->nranks, sizeof *job->ranks);
  job->pfds = calloc((size_t)job->nranks * 2, sizeof *job->pfds);
  job->pfd_owner = calloc((size_t)job->nranks * 2, sizeof *job->pfd_owner);
  if (!job->ranks || !job->pfds || !job->pfd_owner) {
    fprintf(stderr, "plaitrun: out of memory\n");
    return -1;
  }
  for (int i = 0; i < job->nranks; i++) {
    rank_proc_t *r = &job->ranks[i];
    r->fds[0] = r->fds[1] = -1;
    r->files[0] = r->files[1] = -1;
    r->stdin_w = -1;
    plaitrun_linebuf_init(&r->lines[0], STDOUT_FILENO, i, opts->prefix);
    plaitrun_linebuf_init(&r->lines[1], STDERR_FILENO, i, opts->prefix);
  }
  for (int i = 0; opts->output_dir && i < job->nranks; i++) {
    rank_proc_t *r = &job->ranks[i];
    if (open_output_files(opts->output_dir, i, job->nranks, r->files) != 0) return -1;
    plaitrun_linebuf_init(&r->lines[0], r->files[0], i, 0);
    plaitrun_linebuf_init(&r->lines[1], r->files[1], i, 0);
  }
  job->devnull = open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (job->devnull < 0) {
    fprintf(stderr, "plaitrun: cannot open /dev/null: %s\n", strerror(errno));
    return -1;
  }
  if (raise_fd_limit(job) != 0) return -1;
  if (plaitrun_signals_install() != 0) {
    fprintf(stderr, "plaitrun: cannot install signal handlers: %s\n", strerror(errno));
    return -1;
  }
  return 0;
}

static void job_free(job_t *job) {
  for (int i = 0; job->ranks && i < job->nranks; i++) {
    close_stdin(&job->ranks[i]);
    for (int s = 0; s < 2; s++) {
      if (job->ranks[i].fds[s] >= 0) close(job->ranks[i].fds[s]);
      if (job->ranks[i].files[s] >= 0) close(job->ranks[i].files[s]);
      plaitrun_linebuf_free(&job->ranks[i].lines[s]);
    }
  }
  if (job->devnull >= 0) close(job->devnull);
  free(job->ranks);
  free(job->pfds);
  free(job->pfd_owner);
}

int plaitrun_job_run(const plaitrun_options_t *opts) {
  job_t job;
  int rc = PLAITRUN_EXIT_INTERNAL;
  if (job_init(&job, opts) == 0) {
    start_ranks(&job);
    job_loop(&job);
    rc = job.exit_code >= 0 ? job.exit_code : 0;
  }
  job_free(&job);
  return rc;
}
