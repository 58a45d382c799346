/* plaitrun inside a Slurm allocation: srun as the start agent (slurm.h). */
#include "slurm.h"

#include "hostnames.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static char srun_path[PATH_MAX];
static int srun_on;

const char *plaitrun_slurm_srun(void) { return srun_on ? srun_path : NULL; }

int plaitrun_slurm_counts(const char *text, int *counts, int max) {
  int n = 0;
  const char *p = text;
  while (*p) {
    char *end;
    if (!isdigit((unsigned char)*p)) return -1;
    errno = 0;
    long c = strtol(p, &end, 10), times = 1;
    if (errno || c < 1 || c > PLAITRUN_MAX_RANKS) return -1;
    p = end;
    if (p[0] == '(') {
      if (p[1] != 'x' || !isdigit((unsigned char)p[2])) return -1;
      times = strtol(p + 2, &end, 10);
      if (errno || times < 1 || times > max || *end != ')') return -1;
      p = end + 1;
    }
    for (long i = 0; i < times; i++) {
      if (n >= max) return -1;
      counts[n++] = (int)c;
    }
    if (*p == ',' && p[1]) p++;
    else if (*p) return -1;
  }
  return n ? n : -1;
}

/* The first executable name on PATH into out; 0, or -1 when none. */
static int find_on_path(const char *name, char *out, size_t cap) {
  const char *path = getenv("PATH");
  if (!path) return -1;
  while (*path) {
    size_t len = strcspn(path, ":");
    if (len && snprintf(out, cap, "%.*s/%s", (int)len, path, name) < (int)cap &&
        access(out, X_OK) == 0)
      return 0;
    path += len + (path[len] == ':');
  }
  return -1;
}

/* `scontrol show hostnames LIST`: one name a line into names; the count, or -1. */
static int expand_nodelist(const char *list, char (*names)[PLAITRUN_HOST_NAME_MAX], int max,
                           char *err, size_t err_size) {
  int fds[2];
  if (pipe(fds) != 0) {
    snprintf(err, err_size, "cannot run scontrol: pipe: %s", strerror(errno));
    return -1;
  }
  pid_t pid = fork();
  if (pid == 0) {
    close(fds[0]);
    dup2(fds[1], STDOUT_FILENO);
    execlp("scontrol", "scontrol", "show", "hostnames", list, (char *)NULL);
    _exit(127);
  }
  close(fds[1]);
  FILE *f = pid > 0 ? fdopen(fds[0], "r") : NULL;
  int n = 0, status = 0, bad = 0;
  char line[PLAITRUN_HOST_NAME_MAX + 2];
  while (f && fgets(line, sizeof line, f)) {
    line[strcspn(line, "\r\n")] = '\0';
    if (!*line) continue;
    if (n >= max || !plaitrun_valid_host_name(line)) bad = 1;
    else memcpy(names[n++], line, strlen(line) + 1); /* valid: shorter than the field */
  }
  if (f) fclose(f);
  else close(fds[0]);
  if (pid > 0) waitpid(pid, &status, 0);
  if (pid < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0 || bad || n == 0) {
    snprintf(err, err_size, "cannot list the allocation's nodes: 'scontrol show hostnames %s' "
             "%s (give the hosts with -H)", list,
             pid < 0 ? "could not start" : bad ? "printed a name plaitrun cannot take"
             : WIFEXITED(status) && WEXITSTATUS(status) == 127 ? "is not on the PATH"
             : "failed");
    return -1;
  }
  return n;
}

/* opts' hosts from the allocation: names and each node's task slots. */
static int hosts_from_allocation(plaitrun_options_t *o, char *err, size_t err_size) {
  static const char *const vars[] = {"SLURM_TASKS_PER_NODE", "SLURM_NTASKS_PER_NODE",
                                     "SLURM_JOB_CPUS_PER_NODE"};
  const char *list = getenv("SLURM_JOB_NODELIST"), *var = NULL, *text = NULL;
  if (!list || !*list) {
    snprintf(err, err_size, "SLURM_JOB_ID is set but SLURM_JOB_NODELIST is not: cannot tell "
             "the allocation's nodes (give the hosts with -H)");
    return -1;
  }
  static char names[PLAITRUN_MAX_HOSTS][PLAITRUN_HOST_NAME_MAX];
  static int counts[PLAITRUN_MAX_HOSTS];
  int n = expand_nodelist(list, names, PLAITRUN_MAX_HOSTS, err, err_size);
  if (n < 0) return -1;
  for (size_t i = 0; i < sizeof vars / sizeof vars[0] && !text; i++)
    if ((text = getenv(vars[i]))) var = vars[i];
  int nc = text ? plaitrun_slurm_counts(text, counts, PLAITRUN_MAX_HOSTS) : -1;
  if (nc != n && !(nc == 1 && text && !strchr(text, ','))) {
    snprintf(err, err_size, "cannot tell the task slots of the allocation's %d node(s) (%s): "
             "%s%s%s (give the hosts with -H host:slots)", n, list, var ? var : "no SLURM_TASKS_PER_NODE",
             var ? "=" : "", text ? text : "");
    return -1;
  }
  o->n_hosts = n;
  o->slots = 0;
  for (int h = 0; h < n; h++) {
    memcpy(o->hosts[h].name, names[h], sizeof o->hosts[h].name);
    o->hosts[h].slots = counts[nc == n ? h : 0];
    o->hosts[h].local = plaitrun_is_this_host(names[h]);
    o->slots += o->hosts[h].slots;
  }
  if (o->nranks > o->slots) {
    snprintf(err, err_size, "-np %d is more than the %d task slot(s) of this Slurm allocation "
             "(%s, %s=%s)", o->nranks, o->slots, list, var, text);
    return -1;
  }
  return 0;
}

int plaitrun_slurm_setup(plaitrun_options_t *o, char *err, size_t err_size) {
  const char *job = getenv("SLURM_JOB_ID");
  if (!job || !*job || getenv("PLAITRUN_AGENT") || getenv("PLAITRUN_SSH")) return 0;
  if (find_on_path("srun", srun_path, sizeof srun_path) != 0) return 0;
  if (o->n_hosts == 0 && !o->elastic && hosts_from_allocation(o, err, err_size) != 0) return -1;
  srun_on = 1;
  o->remote = 1; /* every rank through srun; rank 0's host tells the others where it listens */
  fprintf(stderr, "plaitrun: in Slurm job %s: starting the ranks with %s, not ssh, on", job,
          srun_path);
  for (int h = 0; h < o->n_hosts && h < 8; h++)
    fprintf(stderr, "%s %s:%d", h ? "," : "", o->hosts[h].name, o->hosts[h].slots);
  fprintf(stderr, "%s (set PLAITRUN_SSH or PLAITRUN_AGENT to choose otherwise)\n",
          o->n_hosts > 8 ? ", ..." : o->n_hosts ? "" : " the hosts found");
  return 0;
}

int plaitrun_slurm_put_words(char **argv, size_t *words, const char *host) {
  char nodelist[PLAITRUN_HOST_NAME_MAX + 16];
  snprintf(nodelist, sizeof nodelist, "--nodelist=%s", host);
  const char *w[] = {srun_path, "--nodes=1", "--ntasks=1", nodelist, "--overlap",
                     "--kill-on-bad-exit=1", "--input=all", "--quiet", "--job-name=plaitrun",
                     "sh", "-c"};
  for (size_t i = 0; i < sizeof w / sizeof w[0]; i++)
    if (!(argv[(*words)++] = strdup(w[i]))) return -1;
  return 0;
}
