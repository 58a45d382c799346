#include "discovery.h"

#include "../hostnames.h"
#include "../signals.h"
#include "util/eintr.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

/* ---- parsing ---- */

static int whole_slots(const char *text, int *out) {
  if (!*text) return -1;
  long v = 0;
  for (const char *c = text; *c; c++) {
    if (!isdigit((unsigned char)*c)) return -1;
    v = v * 10 + (*c - '0');
    if (v > PLAITRUN_MAX_RANKS) return -1;
  }
  if (v < 1) return -1;
  *out = (int)v;
  return 0;
}

/* Splits "host", "host:slots", "[v6]:slots" or a bare IPv6 address (two
 * colons or more: no slots) in place. *slots_text NULL when none. */
static void split_line(char *line, char **host, char **slots_text) {
  *host = line;
  *slots_text = NULL;
  char *colon = NULL;
  if (line[0] == '[') {
    char *close = strchr(line, ']');
    if (close && close[1] == ':') colon = close + 1;
  } else {
    char *first = strchr(line, ':');
    if (first && !strchr(first + 1, ':')) colon = first;
  }
  if (colon) {
    *colon = '\0';
    *slots_text = colon + 1;
  }
}

static int add_host(plaitrun_hostlist_t *out, const char *host, int slots, char *err,
                    size_t err_size) {
  for (int k = 0; k < out->n; k++) {
    if (strcmp(out->hosts[k].name, host) != 0) continue;
    if (out->hosts[k].slots == slots) return 0; /* the same line again */
    snprintf(err, err_size, "host '%s' is listed twice with different slots (%d and %d)", host,
             out->hosts[k].slots, slots);
    return -1;
  }
  if (out->n >= PLAITRUN_MAX_HOSTS) {
    snprintf(err, err_size, "more than %d hosts", PLAITRUN_MAX_HOSTS);
    return -1;
  }
  size_t len = strlen(host); /* shorter than the name: plaitrun_valid_host_name */
  memcpy(out->hosts[out->n].name, host, len + 1);
  out->hosts[out->n].slots = slots;
  out->n++;
  return 0;
}

/* One line, already trimmed and not empty. */
static int parse_line(char *line, int number, int default_slots, plaitrun_hostlist_t *out,
                      char *err, size_t err_size) {
  char shown[80];
  snprintf(shown, sizeof shown, "%.79s", line);
  char *host, *slots_text;
  split_line(line, &host, &slots_text);
  int slots = default_slots;
  if (slots_text && whole_slots(slots_text, &slots) != 0) {
    snprintf(err, err_size, "line %d '%s': the slots '%s' are not a whole number from 1 to %d",
             number, shown, slots_text, PLAITRUN_MAX_RANKS);
    return -1;
  }
  if (!plaitrun_valid_host_name(host)) {
    snprintf(err, err_size, "line %d '%s': not a host name (expected host or host:slots; "
             "letters, digits, '.', '-', '_', ':', not starting with '-')", number, shown);
    return -1;
  }
  return add_host(out, host, slots, err, err_size);
}

int plaitrun_discovery_parse(const char *text, int default_slots, plaitrun_hostlist_t *out,
                             char *err, size_t err_size) {
  out->n = 0;
  int number = 0;
  const char *p = text;
  while (*p) {
    const char *nl = strchr(p, '\n');
    size_t len = nl ? (size_t)(nl - p) : strlen(p);
    number++;
    char line[PLAITRUN_HOST_NAME_MAX + 16];
    const char *start = p;
    p = nl ? nl + 1 : p + len;
    while (len > 0 && isspace((unsigned char)*start)) start++, len--;
    while (len > 0 && isspace((unsigned char)start[len - 1])) len--;
    if (len == 0 || start[0] == '#') continue;
    if (len >= sizeof line) {
      snprintf(err, err_size, "line %d: longer than %zu characters: not a host", number,
               sizeof line - 1);
      return -1;
    }
    memcpy(line, start, len);
    line[len] = '\0';
    if (parse_line(line, number, default_slots, out, err, err_size) != 0) return -1;
  }
  return 0;
}

/* ---- running the script ---- */

void plaitrun_discovery_init(plaitrun_discovery_t *d) {
  memset(d, 0, sizeof *d);
  d->fds[0] = d->fds[1] = -1;
}

int plaitrun_discovery_running(const plaitrun_discovery_t *d) { return d->pid > 0; }

static void free_run(plaitrun_discovery_t *d) {
  for (int s = 0; s < 2; s++) {
    if (d->fds[s] >= 0) close(d->fds[s]);
    free(d->text[s]);
  }
  plaitrun_discovery_init(d);
}

static void child_exec(const char *script, int out_fd, int err_fd) {
  setpgid(0, 0);
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  plaitrun_signals_reset_in_child();
  int null = open("/dev/null", O_RDONLY);
  if (null < 0 || dup2(null, 0) < 0 || dup2(out_fd, 1) < 0 || dup2(err_fd, 2) < 0) _exit(127);
  execl("/bin/sh", "sh", "-c", script, (char *)NULL);
  _exit(127);
}

int plaitrun_discovery_start(plaitrun_discovery_t *d, const char *script, double now, char *err,
                             size_t err_size) {
  free_run(d);
  int out[2] = {-1, -1}, errp[2] = {-1, -1};
  if (pipe2(out, O_CLOEXEC) != 0 || pipe2(errp, O_CLOEXEC) != 0) {
    snprintf(err, err_size, "cannot run the discovery script: pipe: %s", strerror(errno));
    goto fail;
  }
  d->text[0] = calloc(1, 1);
  d->text[1] = calloc(1, 1);
  if (!d->text[0] || !d->text[1]) {
    snprintf(err, err_size, "cannot run the discovery script: out of memory");
    goto fail;
  }
  pid_t pid = fork();
  if (pid < 0) {
    snprintf(err, err_size, "cannot run the discovery script: fork: %s", strerror(errno));
    goto fail;
  }
  if (pid == 0) child_exec(script, out[1], errp[1]);
  setpgid(pid, pid);
  close(out[1]);
  close(errp[1]);
  d->pid = pid;
  d->fds[0] = out[0];
  d->fds[1] = errp[0];
  for (int s = 0; s < 2; s++) fcntl(d->fds[s], F_SETFL, fcntl(d->fds[s], F_GETFL) | O_NONBLOCK);
  d->deadline = now + PLAITRUN_DISCOVERY_TIMEOUT_S;
  return 0;
fail:
  for (int k = 0; k < 2; k++) {
    if (out[k] >= 0) close(out[k]);
    if (errp[k] >= 0) close(errp[k]);
  }
  free_run(d);
  return -1;
}

int plaitrun_discovery_pollfds(const plaitrun_discovery_t *d, struct pollfd *fds, int cap) {
  int k = 0;
  for (int s = 0; s < 2 && k < cap; s++)
    if (d->fds[s] >= 0) fds[k++] = (struct pollfd){.fd = d->fds[s], .events = POLLIN};
  return k;
}

/* Reads what stream s has; closes it at EOF. stderr keeps its first 4 KiB. */
static void read_stream(plaitrun_discovery_t *d, int s) {
  char chunk[4096];
  for (;;) {
    ssize_t n;
    PLAIT_RETRY_EINTR(n, read(d->fds[s], chunk, sizeof chunk));
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
    if (n <= 0) {
      close(d->fds[s]);
      d->fds[s] = -1;
      return;
    }
    size_t limit = s == 0 ? PLAITRUN_DISCOVERY_OUTPUT_MAX : 4096;
    size_t take = (size_t)n;
    if (d->len[s] + take > limit) {
      take = limit - d->len[s];
      if (s == 0) d->overflow = 1;
    }
    if (take == 0) continue;
    char *grown = realloc(d->text[s], d->len[s] + take + 1);
    if (!grown) {
      d->overflow = 1;
      continue;
    }
    memcpy(grown + d->len[s], chunk, take);
    d->len[s] += take;
    grown[d->len[s]] = '\0';
    d->text[s] = grown;
  }
}

/* "; stderr: <first line>" or "" */
static void stderr_note(const plaitrun_discovery_t *d, char *out, size_t cap) {
  const char *t = d->text[1] ? d->text[1] : "";
  while (*t == '\n') t++;
  size_t len = strcspn(t, "\n");
  if (len == 0) {
    snprintf(out, cap, " (no stderr)");
    return;
  }
  snprintf(out, cap, "; its stderr: %.*s", (int)(len > 200 ? 200 : len), t);
}

static int finish(plaitrun_discovery_t *d, int default_slots, plaitrun_hostlist_t *out,
                  char *err, size_t err_size) {
  char note[256], why[400];
  int rc = -1;
  stderr_note(d, note, sizeof note);
  if (d->timed_out)
    snprintf(err, err_size, "ran past %.0f s (killed)%s", PLAITRUN_DISCOVERY_TIMEOUT_S, note);
  else if (WIFSIGNALED(d->status))
    snprintf(err, err_size, "killed by signal %d (%s)%s", WTERMSIG(d->status),
             strsignal(WTERMSIG(d->status)), note);
  else if (WEXITSTATUS(d->status) != 0)
    snprintf(err, err_size, "exit status %d%s", WEXITSTATUS(d->status), note);
  else if (d->overflow)
    snprintf(err, err_size, "printed more than %d bytes", PLAITRUN_DISCOVERY_OUTPUT_MAX);
  else if (plaitrun_discovery_parse(d->text[0], default_slots, out, why, sizeof why) != 0)
    snprintf(err, err_size, "%s", why);
  else
    rc = 1;
  free_run(d);
  return rc;
}

int plaitrun_discovery_service(plaitrun_discovery_t *d, double now, int default_slots,
                               plaitrun_hostlist_t *out, char *err, size_t err_size) {
  if (d->pid <= 0) return 0;
  for (int s = 0; s < 2; s++)
    if (d->fds[s] >= 0) read_stream(d, s);
  if (!d->reaped) {
    pid_t got = waitpid(d->pid, &d->status, WNOHANG);
    if (got == d->pid) d->reaped = 1;
  }
  if (now >= d->deadline && (!d->reaped || d->fds[0] >= 0 || d->fds[1] >= 0)) {
    kill(-d->pid, SIGKILL);
    if (!d->reaped) {
      pid_t got;
      PLAIT_RETRY_EINTR(got, waitpid(d->pid, &d->status, 0));
      d->reaped = 1;
    }
    d->timed_out = 1;
  }
  if (!d->timed_out && (!d->reaped || d->fds[0] >= 0 || d->fds[1] >= 0)) return 0;
  return finish(d, default_slots, out, err, err_size);
}

void plaitrun_discovery_cancel(plaitrun_discovery_t *d) {
  if (d->pid > 0) {
    kill(-d->pid, SIGKILL);
    if (!d->reaped) {
      pid_t got;
      PLAIT_RETRY_EINTR(got, waitpid(d->pid, NULL, 0));
      (void)got;
    }
  }
  free_run(d);
}
