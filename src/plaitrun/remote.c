#include "remote.h"

#include "jobenv.h"
#include "slurm.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

extern char **environ;

/* Reads the secret from the first line of stdin, runs the command ("$@") in a
 * session of its own, and stops that session when stdin ends. %g: grace.
 * The watcher reads stdin through fd 3: sh gives a background job /dev/null
 * as its stdin unless it is redirected. */
static const char WRAPPER[] =
    "IFS= read -r PLAIT_SECRET || exit 255; export PLAIT_SECRET; exec 3<&0; "
    "setsid \"$@\" </dev/null 3<&- & c=$!; "
    "{ while read -r _; do :; done; kill -TERM -$c 2>/dev/null; sleep %g; "
    "kill -KILL -$c 2>/dev/null; } <&3 & w=$!; "
    "wait $c; s=$?; kill $w 2>/dev/null; exit $s";

void plaitrun_place(const plaitrun_options_t *o, int rank, int *host, int *local_rank,
                    int *local_size) {
  *host = -1;
  *local_rank = rank;
  *local_size = o->nranks;
  int first = 0;
  for (int h = 0; h < o->n_hosts; h++) {
    int count = o->hosts[h].slots;
    if (first + count > o->nranks) count = o->nranks - first;
    if (rank < first + count) {
      *host = h;
      *local_rank = rank - first;
      *local_size = count;
      return;
    }
    first += count;
  }
}

int plaitrun_rendezvous_host(const plaitrun_options_t *o, char *out, size_t cap, char *err,
                             size_t err_size) {
  const char *name = o->hosts[0].name;
  char me[PLAITRUN_HOST_NAME_MAX];
  if (o->hosts[0].local && (!strcmp(name, "localhost") || !strncmp(name, "127.", 4) ||
                            !strcmp(name, "::1") || !strcmp(name, "localhost.localdomain"))) {
    if (gethostname(me, sizeof me) != 0) {
      snprintf(err, err_size, "cannot tell the other hosts where rank 0 listens: this host "
               "has no name (set PLAIT_RENDEZVOUS=host:port)");
      return -1;
    }
    me[sizeof me - 1] = '\0';
    name = me;
  }
  if (strchr(name, ':') && name[0] != '[')
    snprintf(out, cap, "[%s]", name); /* IPv6: PLAIT_RENDEZVOUS=[addr]:port */
  else
    snprintf(out, cap, "%s", name);
  return 0;
}

/* A growing string. */
typedef struct {
  char *s;
  size_t len, cap;
  int oom;
} sbuf_t;

static void put(sbuf_t *b, const char *text, size_t n) {
  if (b->oom) return;
  if (b->len + n + 1 > b->cap) {
    size_t cap = b->cap ? b->cap : 1024;
    while (b->len + n + 1 > cap) cap *= 2;
    char *s = realloc(b->s, cap);
    if (!s) {
      b->oom = 1;
      return;
    }
    b->s = s;
    b->cap = cap;
  }
  memcpy(b->s + b->len, text, n);
  b->len += n;
  b->s[b->len] = '\0';
}

static void puts_(sbuf_t *b, const char *text) { put(b, text, strlen(text)); }

/* text in single quotes for a POSIX shell ('it'\''s'), then a space. */
static void put_quoted(sbuf_t *b, const char *text) {
  puts_(b, "'");
  for (const char *c = text; *c; c++) {
    if (*c == '\'')
      puts_(b, "'\\''");
    else
      put(b, c, 1);
  }
  puts_(b, "' ");
}

/* Variables a remote rank gets from plaitrun's environment. */
static int forwarded(const char *entry) {
  static const char *const prefixes[] = {"PLAIT_", "HOROVOD_", "FI_"};
  static const char *const names[] = {"PATH", "LD_LIBRARY_PATH", "PYTHONPATH"};
  static const char *const own[] = {"PLAIT_SECRET", "PLAIT_RANK", "PLAIT_LOCAL_RANK",
                                    "PLAIT_LOCAL_SIZE", "PLAIT_ELASTIC_WORKER",
                                    "PLAIT_ELASTIC_DRIVER"};
  size_t len = strcspn(entry, "=");
  if (entry[len] != '=' || len == 0) return 0;
  for (size_t i = 0; i < len; i++)
    if (!isalnum((unsigned char)entry[i]) && entry[i] != '_') return 0;
  for (size_t i = 0; i < sizeof own / sizeof own[0]; i++)
    if (strlen(own[i]) == len && !strncmp(entry, own[i], len)) return 0;
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
    if (strlen(names[i]) == len && !strncmp(entry, names[i], len)) return 1;
  for (size_t i = 0; i < sizeof prefixes / sizeof prefixes[0]; i++)
    if (!strncmp(entry, prefixes[i], strlen(prefixes[i]))) return 1;
  return 0;
}

/* The command line the remote shell runs; vars: "NAME=value ..." of its own. */
static char *remote_command(const plaitrun_options_t *o, const char *vars) {
  sbuf_t b = {0};
  char cwd[PATH_MAX], text[512];
  if (getcwd(cwd, sizeof cwd)) {
    puts_(&b, "cd ");
    put_quoted(&b, cwd);
    puts_(&b, "2>/dev/null; ");
  }
  puts_(&b, "exec env ");
  for (char **e = environ; e && *e; e++)
    if (forwarded(*e)) put_quoted(&b, *e);
  puts_(&b, vars);
  puts_(&b, " sh -c ");
  snprintf(text, sizeof text, WRAPPER, o->grace_s);
  put_quoted(&b, text);
  puts_(&b, "plaitrun-rank ");
  for (char **a = o->command; *a; a++) put_quoted(&b, *a);
  if (b.oom) {
    free(b.s);
    return NULL;
  }
  return b.s;
}

void plaitrun_remote_send_secret(int fd) {
  const char *secret = getenv("PLAIT_SECRET");
  char line[PLAITRUN_SECRET_HEX_LEN * 4 + 2]; /* room for a longer secret of the user's */
  int n = snprintf(line, sizeof line, "%s\n", secret ? secret : "");
  if (n > 0 && (size_t)n < sizeof line) {
    ssize_t w;
    do {
      w = write(fd, line, (size_t)n);
    } while (w < 0 && errno == EINTR);
  }
  memset(line, 0, sizeof line);
}

void plaitrun_remote_argv_free(char **argv) {
  for (char **a = argv; a && *a; a++) free(*a);
  free(argv);
}

char **plaitrun_remote_argv(const plaitrun_options_t *o, int host, int rank, int local_rank,
                            int local_size, char *err, size_t err_size) {
  char vars[128];
  snprintf(vars, sizeof vars, "PLAIT_RANK=%d PLAIT_LOCAL_RANK=%d PLAIT_LOCAL_SIZE=%d", rank,
           local_rank, local_size);
  char what[64];
  snprintf(what, sizeof what, "rank %d", rank);
  return plaitrun_remote_argv_for(o, o->hosts[host].name, vars, what, err, err_size);
}

/* The agent of PLAITRUN_AGENT, or NULL when it is unset or blank. */
static const char *agent_command(void) {
  const char *a = getenv("PLAITRUN_AGENT");
  return a && a[strspn(a, " \t")] ? a : NULL;
}

const char *plaitrun_remote_via(void) {
  return agent_command() ? "PLAITRUN_AGENT" : plaitrun_slurm_srun() ? "srun" : "ssh";
}

int plaitrun_remote_start(int host_is_local) {
  return !host_is_local || agent_command() != NULL || plaitrun_slurm_srun() != NULL;
}

/* argv[*words...] = cmd's words, split at blanks; -1 when out of memory. */
static int put_words(char **argv, size_t *words, const char *cmd) {
  char *copy = strdup(cmd), *save = NULL;
  if (!copy) return -1;
  for (char *w = strtok_r(copy, " \t", &save); w; w = strtok_r(NULL, " \t", &save))
    if (!(argv[(*words)++] = strdup(w))) {
      free(copy);
      return -1;
    }
  free(copy);
  return 0;
}

char **plaitrun_remote_argv_for(const plaitrun_options_t *o, const char *host, const char *vars,
                                const char *what, char *err, size_t err_size) {
  const char *agent = agent_command();
  const char *ssh = getenv("PLAITRUN_SSH");
  if (ssh == NULL) ssh = "ssh";
  const char *cmd = agent ? agent : ssh;
  size_t words = 0, cap = strlen(cmd) / 2 + 16 + PLAITRUN_SLURM_WORDS;
  char **argv = calloc(cap, sizeof *argv);
  if (!agent && plaitrun_slurm_srun()) { /* srun in a Slurm allocation (slurm.h) */
    if (!argv || plaitrun_slurm_put_words(argv, &words, host) != 0 ||
        !(argv[words++] = remote_command(o, vars)))
      goto oom;
    return argv;
  }
  if (!argv || put_words(argv, &words, cmd) != 0) goto oom;
  if (words == 0) {
    snprintf(err, err_size, "PLAITRUN_SSH is empty: it must name the ssh command (e.g. "
             "'ssh' or 'ssh -F /path/to/ssh_config')");
    plaitrun_remote_argv_free(argv);
    return NULL;
  }
  if (!agent) {
    const char *extra[] = {"-T", "-o", "BatchMode=yes"};
    for (size_t i = 0; i < 3; i++)
      if (!(argv[words++] = strdup(extra[i]))) goto oom;
    if (o->ssh_port &&
        (!(argv[words++] = strdup("-p")) || !(argv[words++] = strdup(o->ssh_port))))
      goto oom;
    if (o->ssh_identity &&
        (!(argv[words++] = strdup("-i")) || !(argv[words++] = strdup(o->ssh_identity))))
      goto oom;
    if (!(argv[words++] = strdup("--"))) goto oom;
  }
  if (!(argv[words++] = strdup(host)) || !(argv[words++] = remote_command(o, vars))) goto oom;
  return argv;

oom:
  snprintf(err, err_size, "out of memory building the %s command of %s", agent ? "agent" : "ssh",
           what);
  plaitrun_remote_argv_free(argv);
  return NULL;
}
