/*
 * plaitrun's elastic driver: set-up, the loop, discovery ticks and the ends
 * (driver.h; the rules of the epochs are epoch.c's).
 *
 * The loop polls the workers' output pipes, the rendezvous server's fds and
 * the discovery script's pipes, with signals let in only inside ppoll
 * (signals.h), and wakes at least every second (the discovery tick).
 *
 * Ends: a worker exits 0 -> no more epochs; the others get
 * PLAITRUN_ELASTIC_FINISH_S, then SIGTERM, then SIGKILL after --grace; exit 0.
 * No worker left (every one failed), --reset-limit reached, fewer than
 * --min-np workers for --elastic-timeout, or the discovery script failing at
 * the start or for --elastic-timeout in a row -> every worker is stopped,
 * exit 1. SIGINT/SIGTERM/SIGHUP/SIGQUIT: forwarded, then SIGKILL after
 * --grace (or at a second signal); exit 128+S.
 */
#include "driver.h"

#include "driver_internal.h"

#include "../jobenv.h"
#include "../signals.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define RDV_FDS_MAX 4096

double plaitrun_elastic_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

void plaitrun_driver_end(driver_t *d, int exit_code, int signo, const char *reason) {
  if (d->phase == D_STOPPING || d->phase == D_KILLED) return;
  if (d->exit_code < 0 || exit_code != 0) d->exit_code = exit_code;
  plaitrun_epoch_stop_all_joins(d, reason);
  d->phase = D_STOPPING;
  d->kill_at = plaitrun_elastic_now() + d->opts->grace_s;
  plaitrun_workers_signal_all(d, signo);
}

static void on_signal(driver_t *d, int signo) {
  if (d->phase == D_RUNNING || d->phase == D_FINISHING) {
    char why[64];
    snprintf(why, sizeof why, "plaitrun got %s", plaitrun_signal_name(signo));
    if (d->running > 0)
      fprintf(stderr, "plaitrun: got %s; forwarding it to the workers\n",
              plaitrun_signal_name(signo));
    d->exit_code = 128 + signo;
    plaitrun_driver_end(d, 128 + signo, signo, why);
  } else if (d->phase == D_STOPPING) {
    if (d->running > 0)
      fprintf(stderr, "plaitrun: got %s again; killing the workers\n", plaitrun_signal_name(signo));
    d->phase = D_KILLED;
    d->give_up_at = plaitrun_elastic_now() + 5.0;
    plaitrun_workers_signal_all(d, SIGKILL);
  }
}

/* ---- hosts and discovery ---- */

static void say_changes(const driver_t *d) {
  for (int k = 0; k < d->hosts->n_changes; k++) {
    const plaitrun_host_change_t *c = &d->hosts->changes[k];
    const plaitrun_host_state_t *h = &d->hosts->hosts[c->host];
    switch (c->kind) {
    case PLAITRUN_HOST_NEW:
      fprintf(stderr, "plaitrun elastic: host %s added (%d slot%s)%s\n", h->name, h->slots,
              h->slots == 1 ? "" : "s", h->blacklisted ? ", blacklisted" : "");
      break;
    case PLAITRUN_HOST_GONE:
      fprintf(stderr, "plaitrun elastic: host %s removed from the host list\n", h->name);
      break;
    case PLAITRUN_HOST_SLOTS:
      fprintf(stderr, "plaitrun elastic: host %s now has %d slot%s (was %d)\n", h->name,
              h->slots, h->slots == 1 ? "" : "s", c->old_slots);
      break;
    case PLAITRUN_HOST_BACK:
      fprintf(stderr, "plaitrun elastic: host %s back from the blacklist (cooldown over)\n",
              h->name);
      break;
    }
  }
}

static void take_hosts(driver_t *d, double now) {
  if (plaitrun_hosts_update(d->hosts, d->list, now) < 0)
    fprintf(stderr, "plaitrun elastic: more than %d hosts known; new ones are left out\n",
            PLAITRUN_HOSTS_TABLE_MAX);
  say_changes(d);
}

static int default_slots(const driver_t *d) {
  return d->opts->slots_per_host ? d->opts->slots_per_host : 1;
}

static void discovery_failed(driver_t *d, double now, const char *err) {
  const char *script = d->opts->discovery_script;
  if (d->failing_since == 0) {
    d->failing_since = now;
    fprintf(stderr, "plaitrun elastic: warning: the discovery script '%s' failed: %s; keeping "
            "the last host list\n", script, err);
  }
  if (now - d->failing_since < d->opts->elastic_timeout_s) return;
  char why[700];
  snprintf(why, sizeof why, "the discovery script '%.200s' failed for %d s (--elastic-timeout); "
           "last: %.400s", script, d->opts->elastic_timeout_s, err);
  fprintf(stderr, "plaitrun elastic: %s; stopping\n", why);
  plaitrun_driver_end(d, 1, SIGTERM, why);
}

/* Services the running script, and starts it again every tick. */
static void discovery_step(driver_t *d, double now) {
  if (!d->opts->discovery_script) {
    take_hosts(d, now); /* -H: fixed; cooldowns end here */
    return;
  }
  char err[600];
  int rc = plaitrun_discovery_service(&d->disc, now, default_slots(d), d->list, err, sizeof err);
  if (rc > 0) {
    if (d->failing_since != 0)
      fprintf(stderr, "plaitrun elastic: the discovery script works again\n");
    d->failing_since = 0;
    take_hosts(d, now);
  } else if (rc < 0) {
    discovery_failed(d, now, err);
  } else if (!plaitrun_discovery_running(&d->disc)) {
    take_hosts(d, now); /* between runs: cooldowns end on time */
  }
  if (!plaitrun_discovery_running(&d->disc) && now >= d->next_tick && d->phase == D_RUNNING) {
    d->next_tick = now + PLAITRUN_ELASTIC_TICK_S;
    if (plaitrun_discovery_start(&d->disc, d->opts->discovery_script, now, err, sizeof err))
      discovery_failed(d, now, err);
  }
}

/* The first run: its failure fails the job. 0, or -1 after saying why. */
static int first_discovery(driver_t *d) {
  char err[600];
  double now = plaitrun_elastic_now();
  if (!d->opts->discovery_script) {
    for (int k = 0; k < d->opts->n_hosts; k++) {
      snprintf(d->list->hosts[k].name, sizeof d->list->hosts[k].name, "%s",
               d->opts->hosts[k].name);
      d->list->hosts[k].slots = d->opts->hosts[k].slots;
    }
    d->list->n = d->opts->n_hosts;
    take_hosts(d, now);
    return 0;
  }
  int rc = plaitrun_discovery_start(&d->disc, d->opts->discovery_script, now, err, sizeof err);
  while (rc == 0) {
    struct pollfd fds[2];
    int n = plaitrun_discovery_pollfds(&d->disc, fds, 2);
    poll(fds, (nfds_t)n, 100);
    rc = plaitrun_discovery_service(&d->disc, plaitrun_elastic_now(), default_slots(d), d->list,
                                    err, sizeof err);
  }
  if (rc < 0) {
    fprintf(stderr, "plaitrun: the discovery script '%s' failed: %s\n",
            d->opts->discovery_script, err);
    return -1;
  }
  take_hosts(d, now);
  d->next_tick = now + PLAITRUN_ELASTIC_TICK_S;
  return 0;
}

/* Before the first workers: wait for -np usable slots, up to --elastic-timeout. */
static void start_step(driver_t *d, double now) {
  if (d->started) {
    if (d->phase == D_RUNNING) plaitrun_workers_start_missing(d);
    return;
  }
  int slots = plaitrun_hosts_usable_slots(d->hosts);
  if (slots >= d->opts->nranks) {
    d->started = 1;
    d->waiting_since = 0;
    plaitrun_workers_start_missing(d);
    return;
  }
  if (d->waiting_since == 0) {
    d->waiting_since = now;
    fprintf(stderr, "plaitrun elastic: %d slot%s, waiting up to %d s for %d\n", slots,
            slots == 1 ? "" : "s", d->opts->elastic_timeout_s, d->opts->nranks);
  }
  if (now - d->waiting_since >= d->opts->elastic_timeout_s) {
    char why[160];
    snprintf(why, sizeof why, "fewer than %s %d slots for %d seconds (--elastic-timeout)",
             d->opts->nranks == d->opts->min_np ? "--min-np" : "-np", d->opts->nranks,
             d->opts->elastic_timeout_s);
    fprintf(stderr, "plaitrun elastic: %s; stopping\n", why);
    plaitrun_driver_end(d, 1, SIGTERM, why);
  }
}

/* ---- the loop ---- */

static void check_ends(driver_t *d, double now) {
  if (d->phase == D_RUNNING && d->started && d->running == 0) {
    const char *why = d->failures ? "every worker failed" : "no worker is left";
    fprintf(stderr, "plaitrun elastic: %s; stopping\n", why);
    plaitrun_driver_end(d, 1, SIGTERM, why);
  }
  if (d->phase == D_FINISHING && now >= d->finish_at)
    plaitrun_driver_end(d, 0, SIGTERM, "training already ended");
  if (d->phase == D_STOPPING && now >= d->kill_at) {
    if (d->running > 0)
      fprintf(stderr, "plaitrun elastic: %d worker(s) still running %.1f s after being told to "
              "stop; sending SIGKILL\n", d->running, d->opts->grace_s);
    d->phase = D_KILLED;
    d->give_up_at = now + 5.0;
    plaitrun_workers_signal_all(d, SIGKILL);
  }
  if (d->running == 0 && d->open_fds > 0 && d->drain_at > 0 && now >= d->drain_at)
    plaitrun_workers_drain_all(d);
}

static int loop_done(const driver_t *d, double now) {
  if (d->phase == D_RUNNING || d->phase == D_FINISHING)
    return d->phase == D_FINISHING && d->running == 0 && d->open_fds == 0;
  if (d->phase == D_KILLED && d->running > 0 && now >= d->give_up_at) {
    fprintf(stderr, "plaitrun elastic: %d worker(s) did not exit after SIGKILL; giving up on "
            "them\n", d->running);
    return 1;
  }
  return d->running == 0 && d->open_fds == 0;
}

static double poll_timeout(const driver_t *d, double now) {
  double next = now + PLAITRUN_ELASTIC_TICK_S;
  double deadlines[] = {d->next_tick, d->grace_at, d->phase == D_STOPPING ? d->kill_at : 0,
                        d->phase == D_FINISHING ? d->finish_at : 0, d->drain_at};
  for (size_t k = 0; k < sizeof deadlines / sizeof deadlines[0]; k++)
    if (deadlines[k] > 0 && deadlines[k] < next) next = deadlines[k];
  return next > now ? next - now : 0;
}

static void one_turn(driver_t *d, struct pollfd *fds, int *owner, int cap) {
  double now = plaitrun_elastic_now();
  int nw = plaitrun_workers_pollfds(d, fds, owner, cap - RDV_FDS_MAX - 2);
  int nd = plaitrun_discovery_pollfds(&d->disc, fds + nw, 2);
  int nr = plaitrun_rdv_pollfds(d->rdv, fds + nw + nd, RDV_FDS_MAX);
  double left = poll_timeout(d, now);
  struct timespec ts = {(time_t)left, (long)((left - floor(left)) * 1e9)};
  int ready = ppoll(fds, (nfds_t)(nw + nd + nr), &ts, plaitrun_signals_poll_mask());
  if (ready < 0 && errno != EINTR) {
    fprintf(stderr, "plaitrun elastic: poll: %s; stopping\n", strerror(errno));
    plaitrun_driver_end(d, 1, SIGKILL, "plaitrun failed");
    return;
  }
  int signo;
  while ((signo = plaitrun_signals_take_forward()) != 0) on_signal(d, signo);
  plaitrun_signals_take_child();
  plaitrun_workers_reap(d);
  for (int k = 0; ready > 0 && k < nw; k++)
    if (fds[k].revents) plaitrun_workers_pump(d, owner[k]);
  if (ready > 0) plaitrun_rdv_service(d->rdv, fds + nw + nd, nr);
  now = plaitrun_elastic_now();
  discovery_step(d, now);
  plaitrun_epoch_take_joins(d, now);
  plaitrun_epoch_step(d, now);
  start_step(d, now);
  plaitrun_epoch_updates(d);
  plaitrun_workers_check_stopped(d, now);
  check_ends(d, now);
}

static int run_loop(driver_t *d) {
  int cap = 2 * PLAITRUN_MAX_RANKS * 4 + RDV_FDS_MAX + 2;
  struct pollfd *fds = calloc((size_t)cap, sizeof *fds);
  int *owner = calloc((size_t)cap, sizeof *owner);
  if (!fds || !owner) {
    fprintf(stderr, "plaitrun: out of memory\n");
    free(fds);
    free(owner);
    return PLAITRUN_EXIT_INTERNAL;
  }
  while (!loop_done(d, plaitrun_elastic_now())) one_turn(d, fds, owner, cap);
  free(fds);
  free(owner);
  return d->exit_code >= 0 ? d->exit_code : 0;
}

/* ---- set-up ---- */

/* The workers' environment: PLAIT_SECRET (kept when set), the timeout, and
 * no fixed layout (PLAIT_RANK/SIZE/RENDEZVOUS come from the driver). */
static int prepare_env(driver_t *d) {
  const char *secret = getenv("PLAIT_SECRET");
  char made[PLAITRUN_SECRET_HEX_LEN + 1], timeout[32];
  if ((!secret || !*secret) &&
      (plaitrun_make_secret(made) != 0 || setenv("PLAIT_SECRET", made, 1) != 0)) {
    fprintf(stderr, "plaitrun: cannot make the job's secret: %s\n", strerror(errno));
    return -1;
  }
  memset(made, 0, sizeof made);
  snprintf(timeout, sizeof timeout, "%d", d->opts->elastic_timeout_s);
  static const char *const layout[] = {"PLAIT_RANK", "PLAIT_SIZE", "PLAIT_LOCAL_RANK",
                                       "PLAIT_LOCAL_SIZE", "PLAIT_RENDEZVOUS"};
  for (size_t k = 0; k < sizeof layout / sizeof layout[0]; k++) unsetenv(layout[k]);
  if (setenv("PLAIT_ELASTIC_TIMEOUT_S", timeout, 1) != 0) return -1;
  const char *grace = getenv("PLAIT_ELASTIC_JOIN_GRACE_S");
  d->join_grace_s = PLAITRUN_ELASTIC_JOIN_GRACE_DEFAULT_S;
  if (grace && *grace) {
    char *end = NULL;
    errno = 0;
    double v = strtod(grace, &end);
    if (errno || *end || !isfinite(v) || v < 0 || v > 3600) {
      fprintf(stderr, "plaitrun: PLAIT_ELASTIC_JOIN_GRACE_S='%s': expected seconds from 0 to "
              "3600 (e.g. 5 or 0.5)\n", grace);
      return -1;
    }
    d->join_grace_s = v;
  }
  return 0;
}

/* The rendezvous server: on PLAITRUN_ELASTIC_HOST when set; else on
 * 127.0.0.1 when every host is this one, else on this host's name (what other
 * hosts reach it at, as `plaitrun -H`'s rendezvous). */
static int open_rendezvous(driver_t *d) {
  int all_local = !d->opts->discovery_script;
  for (int k = 0; k < d->opts->n_hosts; k++) all_local &= d->opts->hosts[k].local;
  char bind_host[PLAITRUN_HOST_NAME_MAX] = "127.0.0.1", err[512];
  const char *chosen = getenv("PLAITRUN_ELASTIC_HOST");
  if (chosen && *chosen) {
    snprintf(bind_host, sizeof bind_host, "%.*s", PLAITRUN_HOST_NAME_MAX - 1, chosen);
  } else if (!all_local && (gethostname(bind_host, sizeof bind_host) != 0 || !bind_host[0])) {
    fprintf(stderr, "plaitrun: this host has no name for the workers to reach plaitrun at "
            "(set PLAITRUN_ELASTIC_HOST)\n");
    return -1;
  }
  bind_host[sizeof bind_host - 1] = '\0';
  if (plaitrun_rdv_open(&d->rdv, bind_host, getenv("PLAIT_SECRET"), err, sizeof err) != 0) {
    fprintf(stderr, "plaitrun: cannot open the elastic driver's rendezvous: %s\n", err);
    return -1;
  }
  const char *addr = plaitrun_rdv_address(d->rdv);
  snprintf(d->local_driver, sizeof d->local_driver, "%s", addr);
  snprintf(d->remote_driver, sizeof d->remote_driver, "%s", addr);
  return 0;
}

static int driver_init(driver_t *d, const plaitrun_options_t *opts) {
  memset(d, 0, sizeof *d);
  d->opts = opts;
  d->exit_code = -1;
  d->devnull = -1;
  plaitrun_discovery_init(&d->disc);
  d->start_time = plaitrun_elastic_now();
  d->rng = ((uint64_t)getpid() << 32) ^ (uint64_t)(d->start_time * 1e9) ^ 0x9e3779b97f4a7c15ULL;
  d->hosts = malloc(sizeof *d->hosts);
  d->list = calloc(1, sizeof *d->list);
  if (!d->hosts || !d->list) {
    fprintf(stderr, "plaitrun: out of memory\n");
    return -1;
  }
  plaitrun_hosts_init(d->hosts, opts->cooldown_min_s, opts->cooldown_max_s);
  /* 3 fds per worker and the rendezvous's connections: raise the soft limit
   * (workers get the original one back) */
  struct rlimit lim;
  if (getrlimit(RLIMIT_NOFILE, &lim) == 0) {
    d->child_nofile = lim;
    rlim_t need = (rlim_t)(opts->max_np ? opts->max_np : PLAITRUN_MAX_RANKS) * 4 + 64;
    if (lim.rlim_cur != RLIM_INFINITY && lim.rlim_cur < need) {
      lim.rlim_cur = lim.rlim_max != RLIM_INFINITY && lim.rlim_max < need ? lim.rlim_max : need;
      setrlimit(RLIMIT_NOFILE, &lim); /* best effort: accept() then fails, named, past it */
    }
  }
  d->devnull = open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (d->devnull < 0) {
    fprintf(stderr, "plaitrun: cannot open /dev/null: %s\n", strerror(errno));
    return -1;
  }
  if (prepare_env(d) != 0 || open_rendezvous(d) != 0) return -1;
  if (plaitrun_signals_install() != 0) {
    fprintf(stderr, "plaitrun: cannot install signal handlers: %s\n", strerror(errno));
    return -1;
  }
  fprintf(stderr, "plaitrun elastic: driver at %s; --min-np %d, -np %d, --max-np %d\n",
          d->local_driver, opts->min_np, opts->nranks,
          opts->max_np ? opts->max_np : PLAITRUN_MAX_RANKS);
  return first_discovery(d);
}

static void driver_free(driver_t *d) {
  plaitrun_discovery_cancel(&d->disc);
  plaitrun_workers_free(d);
  if (d->rdv) plaitrun_rdv_close(d->rdv);
  if (d->devnull >= 0) close(d->devnull);
  free(d->hosts);
  free(d->list);
}

int plaitrun_elastic_run(const plaitrun_options_t *opts) {
  driver_t d;
  int rc = PLAITRUN_EXIT_INTERNAL;
  if (driver_init(&d, opts) == 0) rc = run_loop(&d);
  driver_free(&d);
  return rc;
}
