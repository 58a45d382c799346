/*
 * plaitrun's elastic driver: the state its files share (driver.c: set-up,
 * the loop, discovery ticks and the ends; workers.c: starting, reaping and
 * relaying workers; epoch.c: JOINs and forming epochs).
 */
#ifndef PLAITRUN_ELASTIC_DRIVER_INTERNAL_H
#define PLAITRUN_ELASTIC_DRIVER_INTERNAL_H

#include "../linebuf.h"
#include "../options.h"
#include "discovery.h"
#include "hosts.h"
#include "rendezvous.h"

#include <stdint.h>
#include <sys/resource.h>
#include <sys/types.h>

#define PLAITRUN_ELASTIC_JOIN_GRACE_DEFAULT_S 5.0 /* PLAIT_ELASTIC_JOIN_GRACE_S */
#define PLAITRUN_ELASTIC_FINISH_S 30.0 /* after a worker succeeded: the others' time */
#define PLAITRUN_ELASTIC_STOPPED_S 30.0 /* a worker told to stop: then SIGKILL */
#define PLAITRUN_ELASTIC_TICK_S 1.0     /* discovery: every second */

typedef struct worker {
  char name[PLAITRUN_WORKER_NAME_MAX]; /* "host/slot" */
  int host, slot;                      /* host: index in the hosts table */
  pid_t pid;
  int running;                         /* started, not yet reaped */
  int fds[2];                          /* stdout, stderr read ends; -1 closed */
  plaitrun_linebuf_t lines[2];
  int stdin_w;                         /* over ssh: its stdin (the secret); -1 */
  int rank;                            /* in its epoch; -1 before its first */
  uint64_t epoch;                      /* the epoch it was placed in; 0: none */
  int stopped;                         /* told to go (STOP, killed, the end): status ignored */
  int told;                            /* answered STOP: it exits by itself */
  double kill_at;                      /* stopped: SIGKILL then; 0: none */
  int joined;                          /* it has a JOIN waiting for an answer */
  uint64_t join_epoch;                 /* that JOIN's last_epoch */
  char rendezvous[PLAITRUN_ADDR_MAX];  /* that JOIN's listening address */
} worker_t;

typedef enum { D_RUNNING, D_FINISHING, D_STOPPING, D_KILLED } dphase_t;

typedef struct driver {
  const plaitrun_options_t *opts;
  plaitrun_rdv_t *rdv;
  char local_driver[PLAITRUN_ADDR_MAX + PLAITRUN_HOST_NAME_MAX];  /* PLAIT_ELASTIC_DRIVER, local */
  char remote_driver[PLAITRUN_ADDR_MAX + PLAITRUN_HOST_NAME_MAX]; /* over ssh */
  plaitrun_hosts_t *hosts;
  plaitrun_hostlist_t *list;       /* the last good discovery */
  plaitrun_discovery_t disc;
  double next_tick;
  double failing_since;            /* discovery failing since then; 0: fine */
  worker_t *w;
  int n_workers, cap_workers;
  int running;                     /* workers not yet reaped */
  int open_fds;
  int started;                     /* the first workers were started */
  int failures;                    /* worker failures so far */
  uint64_t epoch;                  /* the current epoch; 0: none yet */
  int size;                        /* its size */
  int broken;                      /* it needs re-forming */
  double broken_at;                /* since then */
  double grace_at;                 /* stragglers are killed then; 0: no member JOINed */
  double join_grace_s;
  double waiting_since;            /* below --min-np (or -np at start) since; 0: not */
  uint64_t update_ts;              /* POLL's answer */
  unsigned update_bits;
  dphase_t phase;
  int exit_code;                   /* -1 until the end is known */
  double kill_at, give_up_at, finish_at, drain_at;
  double start_time;
  struct rlimit child_nofile;
  int devnull;
  uint64_t rng;                    /* for the cooldown's random part */
} driver_t;

double plaitrun_elastic_now(void);

/* workers.c */
void plaitrun_workers_start_missing(driver_t *d);
void plaitrun_workers_reap(driver_t *d);
int plaitrun_workers_pollfds(driver_t *d, struct pollfd *fds, int *owner, int cap);
void plaitrun_workers_pump(driver_t *d, int owner);
void plaitrun_workers_drain_all(driver_t *d);
/* A worker the driver gives up on (named lost, straggler): SIGKILL to its
 * process group, counted as a failure of its host. */
void plaitrun_workers_kill_failed(driver_t *d, worker_t *w, const char *why);
/* The driver wants w gone (its status is then ignored); signo 0: it was
 * answered STOP, and exits by itself (SIGKILL after PLAITRUN_ELASTIC_STOPPED_S). */
void plaitrun_workers_stop(driver_t *d, worker_t *w, int signo);
/* signo to every worker but those answered STOP (unless SIGKILL). */
void plaitrun_workers_signal_all(driver_t *d, int signo);
void plaitrun_workers_check_stopped(driver_t *d, double now);
void plaitrun_workers_free(driver_t *d);

/* epoch.c */
void plaitrun_epoch_take_joins(driver_t *d, double now);
void plaitrun_epoch_step(driver_t *d, double now);
void plaitrun_epoch_stop_all_joins(driver_t *d, const char *reason);
void plaitrun_epoch_updates(driver_t *d);
/* Ends the job: pending JOINs get STOP with reason, workers SIGTERM (or signo). */
void plaitrun_driver_end(driver_t *d, int exit_code, int signo, const char *reason);

#endif
