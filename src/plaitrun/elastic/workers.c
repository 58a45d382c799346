/*
 * plaitrun's elastic driver: its workers' processes (driver_internal.h).
 * A worker runs in a process group of its own (spawn.h); over ssh it gets
 * the secret as the first line of its stdin, as `plaitrun -H` ranks do.
 */
#include "driver_internal.h"

#include "../jobenv.h"
#include "../remote.h"
#include "../spawn.h"
#include "util/eintr.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

/* xorshift64*: the cooldown's random part needs no more. */
static double uniform01(driver_t *d) {
  d->rng ^= d->rng >> 12;
  d->rng ^= d->rng << 25;
  d->rng ^= d->rng >> 27;
  return (double)((d->rng * 2685821657736338717ULL) >> 11) / 9007199254740992.0;
}

/* Blacklists host now; says for how long in text ("for good", "for 23 s"). */
static void blacklist(driver_t *d, int host, char *text, size_t cap) {
  double cd = plaitrun_hosts_blacklist(d->hosts, host, plaitrun_elastic_now(), uniform01(d));
  if (cd < 0)
    snprintf(text, cap, "for good");
  else
    snprintf(text, cap, "for %.0f s", cd);
}

static worker_t *new_worker(driver_t *d) {
  if (d->n_workers == d->cap_workers) { /* forget workers that are all done */
    int k = 0;
    for (int i = 0; i < d->n_workers; i++) {
      worker_t *w = &d->w[i];
      if (w->running || w->fds[0] >= 0 || w->fds[1] >= 0) {
        d->w[k++] = *w;
        continue;
      }
      plaitrun_linebuf_free(&w->lines[0]);
      plaitrun_linebuf_free(&w->lines[1]);
    }
    d->n_workers = k;
  }
  if (d->n_workers == d->cap_workers) {
    int cap = d->cap_workers ? 2 * d->cap_workers : 16;
    worker_t *grown = realloc(d->w, (size_t)cap * sizeof *grown);
    if (!grown) return NULL;
    d->w = grown;
    d->cap_workers = cap;
  }
  worker_t *w = &d->w[d->n_workers++];
  memset(w, 0, sizeof *w);
  w->fds[0] = w->fds[1] = w->stdin_w = -1;
  w->rank = -1;
  return w;
}


/* Spawns w (name, host, slot set). 0, or -1 after saying why. */
static int spawn_worker(driver_t *d, worker_t *w) {
  char err[256], vars[PLAITRUN_WORKER_NAME_MAX + sizeof d->remote_driver + 64];
  const plaitrun_host_state_t *h = &d->hosts->hosts[w->host];
  char **argv = d->opts->command;
  int in[2] = {-1, -1}, stdin_fd = d->devnull, remote = plaitrun_remote_start(h->local);
  if (remote) {
    snprintf(vars, sizeof vars, "PLAIT_ELASTIC_WORKER=%s PLAIT_ELASTIC_DRIVER=%s", w->name,
             d->remote_driver);
    char what[PLAITRUN_WORKER_NAME_MAX + 8];
    snprintf(what, sizeof what, "worker %s", w->name);
    argv = plaitrun_remote_argv_for(d->opts, h->name, vars, what, err, sizeof err);
    if (!argv || pipe2(in, O_CLOEXEC) != 0) {
      if (argv) snprintf(err, sizeof err, "pipe: %s", strerror(errno));
      fprintf(stderr, "plaitrun elastic: cannot start worker %s: %s\n", w->name, err);
      plaitrun_remote_argv_free(argv);
      return -1;
    }
    stdin_fd = in[0];
  }
  plaitrun_spawn_spec_t spec = {0, 0, 0, argv, stdin_fd, &d->child_nofile, w->name,
                                d->local_driver};
  plaitrun_child_t child;
  int rc = plaitrun_spawn_rank(&spec, &child, err, sizeof err);
  if (remote) {
    close(in[0]);
    plaitrun_remote_argv_free(argv);
    if (rc != 0) close(in[1]);
  }
  if (rc != 0) {
    fprintf(stderr, "plaitrun elastic: cannot start worker %s: %s\n", w->name,
            rc > 0 ? strerror(rc) : err);
    return -1;
  }
  w->pid = child.pid;
  w->running = 1;
  w->fds[0] = child.out_fd;
  w->fds[1] = child.err_fd;
  if (remote) { /* the secret on stdin, never on a command line */
    plaitrun_remote_send_secret(in[1]);
    w->stdin_w = in[1];
  }
  d->running++;
  d->open_fds += 2;
  return 0;
}

static int slot_taken(const driver_t *d, int host, int slot) {
  for (int i = 0; i < d->n_workers; i++)
    if (d->w[i].running && d->w[i].host == host && d->w[i].slot == slot) return 1;
  return 0;
}

static int start_one(driver_t *d, int host, int slot) {
  worker_t *w = new_worker(d);
  if (!w) {
    fprintf(stderr, "plaitrun elastic: out of memory starting a worker\n");
    return -1;
  }
  w->host = host;
  w->slot = slot;
  snprintf(w->name, sizeof w->name, "%.*s/%d", PLAITRUN_WORKER_NAME_MAX - 13,
           d->hosts->hosts[host].name, slot);
  for (int s = 0; s < 2; s++) {
    plaitrun_linebuf_init(&w->lines[s], s ? STDERR_FILENO : STDOUT_FILENO, 0, d->opts->prefix);
    plaitrun_linebuf_set_label(&w->lines[s], w->name);
  }
  if (spawn_worker(d, w) == 0) return 0;
  d->n_workers--; /* nothing of it is left */
  plaitrun_linebuf_free(&w->lines[0]);
  plaitrun_linebuf_free(&w->lines[1]);
  return -1;
}

/* Fills the usable hosts' free slots, oldest hosts first, up to --max-np. */
void plaitrun_workers_start_missing(driver_t *d) {
  int cap = d->opts->max_np ? d->opts->max_np : PLAITRUN_MAX_RANKS;
  int order[PLAITRUN_HOSTS_TABLE_MAX];
  int n = plaitrun_hosts_ordered(d->hosts, 0, order, PLAITRUN_HOSTS_TABLE_MAX);
  fflush(stdout);
  fflush(stderr);
  for (int k = 0; k < n && d->running < cap; k++) {
    int host = order[k];
    for (int slot = 0; slot < d->hosts->hosts[host].slots && d->running < cap; slot++) {
      if (slot_taken(d, host, slot)) continue;
      if (start_one(d, host, slot) != 0) {
        char cool[48];
        blacklist(d, host, cool, sizeof cool);
        fprintf(stderr, "plaitrun elastic: host %s blacklisted %s\n", d->hosts->hosts[host].name,
                cool);
        break;
      }
    }
  }
}

static void signal_worker(worker_t *w, int signo) {
  if (w->pid <= 0 || !w->running) return;
  kill(-w->pid, signo);
  if (getpgid(w->pid) != w->pid) kill(w->pid, signo);
}

static void close_stdin(worker_t *w) {
  if (w->stdin_w >= 0) close(w->stdin_w);
  w->stdin_w = -1;
}

void plaitrun_workers_stop(driver_t *d, worker_t *w, int signo) {
  (void)d;
  w->stopped = 1;
  if (!signo) { /* answered STOP: no rank any more, its lines carry its name */
    w->told = 1;
    plaitrun_linebuf_set_label(&w->lines[0], w->name);
    plaitrun_linebuf_set_label(&w->lines[1], w->name);
  }
  if (w->kill_at == 0) w->kill_at = plaitrun_elastic_now() + PLAITRUN_ELASTIC_STOPPED_S;
  if (signo) {
    close_stdin(w);
    signal_worker(w, signo);
  }
}

void plaitrun_workers_signal_all(driver_t *d, int signo) {
  for (int i = 0; i < d->n_workers; i++) {
    d->w[i].stopped = 1;
    if (d->w[i].told && signo != SIGKILL) continue;
    close_stdin(&d->w[i]);
    signal_worker(&d->w[i], signo);
  }
}

/* A failure of w: blacklist its host, and the epoch it is in needs re-forming. */
static void failed(driver_t *d, worker_t *w, const char *what) {
  double now = plaitrun_elastic_now();
  char rank[48] = "", cool[48];
  blacklist(d, w->host, cool, sizeof cool);
  if (w->rank >= 0) snprintf(rank, sizeof rank, " (rank %d of epoch %llu)", w->rank,
                             (unsigned long long)w->epoch);
  fprintf(stderr, "plaitrun elastic: worker %s%s %s: host %s blacklisted %s\n", w->name, rank,
          what, d->hosts->hosts[w->host].name, cool);
  d->failures++;
  if (d->epoch > 0 && w->epoch == d->epoch && !d->broken) {
    d->broken = 1;
    d->broken_at = now;
  }
}

void plaitrun_workers_kill_failed(driver_t *d, worker_t *w, const char *why) {
  if (w->stopped) return;
  failed(d, w, why);
  w->stopped = 1;
  close_stdin(w);
  signal_worker(w, SIGKILL);
}

static void on_exit_status(driver_t *d, worker_t *w, int status) {
  if (w->stopped) return; /* the driver asked for it */
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
    if (d->phase == D_RUNNING) {
      char rank[32] = "";
      if (w->rank >= 0) snprintf(rank, sizeof rank, " (rank %d)", w->rank);
      fprintf(stderr, "plaitrun elastic: worker %s%s finished with status 0: no more epochs; the "
              "others get %.0f s to finish\n", w->name, rank, PLAITRUN_ELASTIC_FINISH_S);
      d->phase = D_FINISHING;
      d->exit_code = 0;
      d->finish_at = plaitrun_elastic_now() + PLAITRUN_ELASTIC_FINISH_S;
      plaitrun_epoch_stop_all_joins(d, "training already ended: a worker finished");
    }
    return;
  }
  if (d->phase != D_RUNNING) return;
  char what[128];
  if (WIFEXITED(status) && WEXITSTATUS(status) == 255 &&
      plaitrun_remote_start(d->hosts->hosts[w->host].local))
    snprintf(what, sizeof what, "exited with status 255 (%s's status: the remote side is gone "
             "or unreachable)", plaitrun_remote_via());
  else if (WIFEXITED(status))
    snprintf(what, sizeof what, "exited with status %d", WEXITSTATUS(status));
  else
    snprintf(what, sizeof what, "was killed by signal %d (%s)", WTERMSIG(status),
             strsignal(WTERMSIG(status)));
  failed(d, w, what);
}

void plaitrun_workers_reap(driver_t *d) {
  for (int i = 0; i < d->n_workers; i++) {
    worker_t *w = &d->w[i];
    if (!w->running) continue;
    int status = 0;
    pid_t got = waitpid(w->pid, &status, WNOHANG);
    if (got != w->pid) continue;
    w->running = 0;
    w->joined = 0;
    close_stdin(w);
    d->running--;
    on_exit_status(d, w, status);
  }
  if (d->running == 0 && d->drain_at == 0) d->drain_at = plaitrun_elastic_now() + 1.0;
  if (d->running > 0) d->drain_at = 0;
}

void plaitrun_workers_check_stopped(driver_t *d, double now) {
  for (int i = 0; i < d->n_workers; i++) {
    worker_t *w = &d->w[i];
    if (w->running && w->stopped && w->kill_at > 0 && now >= w->kill_at) {
      fprintf(stderr, "plaitrun elastic: worker %s still runs %.0f s after it was told to stop; "
              "SIGKILL\n", w->name, PLAITRUN_ELASTIC_STOPPED_S);
      signal_worker(w, SIGKILL);
      w->kill_at = 0;
    }
  }
}

int plaitrun_workers_pollfds(driver_t *d, struct pollfd *fds, int *owner, int cap) {
  int k = 0;
  for (int i = 0; i < d->n_workers; i++)
    for (int s = 0; s < 2 && k < cap; s++) {
      if (d->w[i].fds[s] < 0) continue;
      fds[k] = (struct pollfd){.fd = d->w[i].fds[s], .events = POLLIN};
      owner[k++] = i * 2 + s;
    }
  return k;
}

static void close_stream(driver_t *d, worker_t *w, int s) {
  plaitrun_linebuf_finish(&w->lines[s]);
  close(w->fds[s]);
  w->fds[s] = -1;
  d->open_fds--;
}

void plaitrun_workers_pump(driver_t *d, int owner) {
  static char chunk[PLAITRUN_LINE_MAX];
  worker_t *w = &d->w[owner / 2];
  int s = owner % 2;
  if (w->fds[s] < 0) return;
  ssize_t n;
  PLAIT_RETRY_EINTR(n, read(w->fds[s], chunk, sizeof chunk));
  if (n > 0)
    plaitrun_linebuf_feed(&w->lines[s], chunk, (size_t)n);
  else if (n == 0 || errno != EAGAIN)
    close_stream(d, w, s);
}

void plaitrun_workers_drain_all(driver_t *d) {
  for (int i = 0; i < d->n_workers; i++)
    for (int s = 0; s < 2; s++) {
      worker_t *w = &d->w[i];
      if (w->fds[s] < 0) continue;
      fcntl(w->fds[s], F_SETFL, fcntl(w->fds[s], F_GETFL) | O_NONBLOCK);
      for (int k = 0; k < 64 && w->fds[s] >= 0; k++) plaitrun_workers_pump(d, i * 2 + s);
      if (w->fds[s] >= 0) close_stream(d, w, s);
    }
}

void plaitrun_workers_free(driver_t *d) {
  for (int i = 0; i < d->n_workers; i++) {
    worker_t *w = &d->w[i];
    close_stdin(w);
    for (int s = 0; s < 2; s++) {
      if (w->fds[s] >= 0) close(w->fds[s]);
      plaitrun_linebuf_free(&w->lines[s]);
    }
  }
  free(d->w);
  d->w = NULL;
  d->n_workers = d->cap_workers = 0;
}
