/*
 * plaitrun's elastic driver: the host discovery script
 * (--host-discovery-script, run every second, as horovodrun does).
 *
 * The script runs under /bin/sh -c in a process group of its own, with
 * stdin on /dev/null; it prints one line per host, "host" or "host:slots"
 * ("[v6addr]:slots" for an IPv6 address with slots). Lines without slots get
 * --slots-per-host (default 1). Empty lines and lines starting with '#' are
 * skipped; the same line twice counts once; an empty output is a valid list
 * of no hosts (Horovod's "no host ready yet"). A run fails when the script
 * exits non-zero, is killed, runs past PLAITRUN_DISCOVERY_TIMEOUT_S (then it
 * gets SIGKILL), prints more than PLAITRUN_DISCOVERY_OUTPUT_MAX bytes, or
 * prints a line that is not a host: the error names the status (or the line)
 * and the first line of the script's stderr.
 *
 * Non-blocking: the driver polls the fds it gives and calls service.
 */
#ifndef PLAITRUN_ELASTIC_DISCOVERY_H
#define PLAITRUN_ELASTIC_DISCOVERY_H

#include <poll.h>
#include <stddef.h>
#include <sys/types.h>

#include "../options.h"

#define PLAITRUN_DISCOVERY_TIMEOUT_S 10.0
#define PLAITRUN_DISCOVERY_OUTPUT_MAX (1 << 20)

typedef struct {
  char name[PLAITRUN_HOST_NAME_MAX];
  int slots;
} plaitrun_found_host_t;

/* Hosts in the order the script printed them (first occurrence). */
typedef struct {
  plaitrun_found_host_t hosts[PLAITRUN_MAX_HOSTS];
  int n;
} plaitrun_hostlist_t;

/*
 * Parses a script's output (NUL-terminated) into *out. default_slots: for
 * lines without ":slots". 0, or -1 with err naming the line and what is wrong
 * ("line 2 'a b': ...", a host twice with different slots, too many hosts).
 */
int plaitrun_discovery_parse(const char *text, int default_slots, plaitrun_hostlist_t *out,
                             char *err, size_t err_size);

typedef struct {
  pid_t pid;          /* 0: not running */
  int fds[2];         /* stdout, stderr read ends; -1 when closed */
  char *text[2];      /* what each printed so far, NUL-terminated */
  size_t len[2];
  int overflow;       /* stdout went past PLAITRUN_DISCOVERY_OUTPUT_MAX */
  double deadline;    /* CLOCK_MONOTONIC seconds */
  int status;         /* waitpid status once reaped */
  int reaped, timed_out;
} plaitrun_discovery_t;

void plaitrun_discovery_init(plaitrun_discovery_t *d);
/* Starts script (now: CLOCK_MONOTONIC seconds). 0, or -1 with err. */
int plaitrun_discovery_start(plaitrun_discovery_t *d, const char *script, double now, char *err,
                             size_t err_size);
/* 1 while a run is under way. */
int plaitrun_discovery_running(const plaitrun_discovery_t *d);
/* Fills at most cap pollfds for the running script's pipes; returns how many. */
int plaitrun_discovery_pollfds(const plaitrun_discovery_t *d, struct pollfd *fds, int cap);
/*
 * Reads what the pipes have (without blocking), reaps the script, enforces
 * the deadline. Returns 0 while the run goes on; 1 when it ended with a good
 * list in *out; -1 when it failed (err: "exit status 3: <stderr's first
 * line>", "timed out after 10 s", "line 2 'x': ...").
 */
int plaitrun_discovery_service(plaitrun_discovery_t *d, double now, int default_slots,
                               plaitrun_hostlist_t *out, char *err, size_t err_size);
/* Kills a running script and frees everything. */
void plaitrun_discovery_cancel(plaitrun_discovery_t *d);

#endif
