/*
 * Tests of the plaitrun launcher: they run the built binary
 * (PLAIT_TEST_BIN_DIR/plaitrun) with small /bin/sh ranks and check what it
 * prints, the environment the ranks see, and its exit status.
 *
 * No fixed ports or paths: plaitrun picks its own port, and ranks print what
 * they see. Elapsed-time checks are liveness bounds (well under the ranks'
 * sleep), not performance assertions.
 */
#include <criterion/criterion.h>

#include <ctype.h>
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define PLAITRUN_PATH PLAIT_TEST_BIN_DIR "/plaitrun"
#define MAX_ARGS 32

typedef struct text {
  char *data;
  size_t len;
  size_t cap;
} text_t;

typedef struct run {
  /* inputs */
  const char *args[MAX_ARGS]; /* after "plaitrun"; NULL-terminated */
  const char *env[8];         /* "NAME=value" to set; NULL-terminated */
  const char *stdin_text;     /* NULL: /dev/null */
  int signo;                  /* send to plaitrun once stdout has ... */
  int signal_after_lines;     /* ... this many lines */
  /* results */
  int exit_code; /* -1 when plaitrun itself died of a signal */
  double elapsed_s;
  text_t out;
  text_t err;
} run_t;

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void text_add(text_t *t, const char *data, size_t n) {
  if (t->len + n + 1 > t->cap) {
    size_t cap = t->cap ? t->cap : 4096;
    while (cap < t->len + n + 1) cap *= 2;
    t->data = realloc(t->data, cap);
    cr_assert_not_null(t->data);
    t->cap = cap;
  }
  memcpy(t->data + t->len, data, n);
  t->len += n;
  t->data[t->len] = '\0';
}

static size_t count_lines(const text_t *t) {
  size_t n = 0;
  for (size_t i = 0; i < t->len; i++) n += t->data[i] == '\n';
  return n;
}

static void run_free(run_t *run) {
  free(run->out.data);
  free(run->err.data);
}

/* In the child: a clean environment for plaitrun, then exec it. */
static void exec_plaitrun(run_t *run, int in_fd, int out_fd, int err_fd) {
  const char *argv[MAX_ARGS + 2];
  argv[0] = "plaitrun";
  int n = 0;
  while (run->args[n] != NULL && n < MAX_ARGS) {
    argv[n + 1] = run->args[n];
    n++;
  }
  argv[n + 1] = NULL;
  unsetenv("PLAIT_SECRET");
  unsetenv("PLAIT_RENDEZVOUS");
  for (int i = 0; run->env[i] != NULL; i++) putenv((char *)run->env[i]);
  signal(SIGINT, SIG_DFL);
  signal(SIGTERM, SIG_DFL);
  signal(SIGPIPE, SIG_DFL);
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, NULL);
  dup2(in_fd, 0);
  dup2(out_fd, 1);
  dup2(err_fd, 2);
  /* only 0, 1, 2: a copy of the test's pipes left in plaitrun (and so in its
   * ranks) would keep them open after plaitrun is gone */
  for (int fd = 3; fd < 64; fd++) close(fd);
  execv(PLAITRUN_PATH, (char *const *)argv);
  fprintf(stderr, "cannot exec %s: %s\n", PLAITRUN_PATH, strerror(errno));
  _exit(99);
}

/* Reads plaitrun's output until EOF on both pipes (60 s at most). */
static void collect(run_t *run, pid_t pid, int out_fd, int err_fd) {
  struct pollfd pfd[2] = {{.fd = out_fd, .events = POLLIN}, {.fd = err_fd, .events = POLLIN}};
  text_t *dest[2] = {&run->out, &run->err};
  int sent = 0;
  double deadline = run->elapsed_s + 60;
  while (pfd[0].fd >= 0 || pfd[1].fd >= 0) {
    cr_assert_lt(now_s(), deadline, "plaitrun did not finish within 60 s");
    if (poll(pfd, 2, 1000) < 0 && errno != EINTR) cr_assert_fail("poll: %s", strerror(errno));
    for (int i = 0; i < 2; i++) {
      if (pfd[i].fd < 0 || pfd[i].revents == 0) continue;
      char buf[65536];
      ssize_t r = read(pfd[i].fd, buf, sizeof buf);
      if (r > 0) {
        text_add(dest[i], buf, (size_t)r);
      } else if (r == 0 || errno != EINTR) {
        close(pfd[i].fd);
        pfd[i].fd = -1;
      }
    }
    if (run->signo && !sent && count_lines(&run->out) >= (size_t)run->signal_after_lines) {
      kill(pid, run->signo);
      sent = 1;
    }
  }
}

/* Runs plaitrun with run->args and fills the results. */
static void run_plaitrun(run_t *run) {
  int in[2], out[2], err[2];
  cr_assert_eq(pipe(in), 0);
  cr_assert_eq(pipe(out), 0);
  cr_assert_eq(pipe(err), 0);
  fflush(stdout);
  fflush(stderr);
  run->elapsed_s = now_s();
  pid_t pid = fork();
  cr_assert_geq(pid, 0);
  if (pid == 0) {
    close(in[1]);
    close(out[0]);
    close(err[0]);
    exec_plaitrun(run, in[0], out[1], err[1]);
  }
  close(in[0]);
  close(out[1]);
  close(err[1]);
  if (run->stdin_text) {
    ssize_t w = write(in[1], run->stdin_text, strlen(run->stdin_text));
    cr_assert_eq(w, (ssize_t)strlen(run->stdin_text));
  }
  close(in[1]);
  collect(run, pid, out[0], err[0]);
  int status = 0;
  cr_assert_eq(waitpid(pid, &status, 0), pid);
  run->elapsed_s = now_s() - run->elapsed_s;
  run->exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  if (run->out.data == NULL) text_add(&run->out, "", 0);
  if (run->err.data == NULL) text_add(&run->err, "", 0);
}

/* Finds "KEY=" in line and copies its value (up to a space) into out. */
static int field(const char *line, const char *key, char *out, size_t size) {
  const char *p = strstr(line, key);
  if (p == NULL) return -1;
  p += strlen(key);
  size_t n = strcspn(p, " \n");
  if (n >= size) return -1;
  memcpy(out, p, n);
  out[n] = '\0';
  return 0;
}

static int is_hex64(const char *s) {
  if (strlen(s) != 64) return 0;
  for (const char *p = s; *p; p++)
    if (!isxdigit((unsigned char)*p)) return 0;
  return 1;
}

#define ENV_SCRIPT                                                            \
  "echo \"R=$PLAIT_RANK S=$PLAIT_SIZE LR=$PLAIT_LOCAL_RANK "                  \
  "LS=$PLAIT_LOCAL_SIZE V=$PLAIT_RENDEZVOUS K=$PLAIT_SECRET "                 \
  "X=$PLAITRUN_TEST_PASSTHROUGH\""

Test(plaitrun, ranks_get_distinct_ranks_and_shared_job_env, .timeout = 90) {
  run_t run = {.args = {"-np", "4", "/bin/sh", "-c", ENV_SCRIPT},
               .env = {"PLAITRUN_TEST_PASSTHROUGH=kept"}};
  run_plaitrun(&run);
  cr_assert_eq(run.exit_code, 0, "stderr: %s", run.err.data);
  int seen[4] = {0};
  char first_v[128] = "", first_k[128] = "";
  char *save = NULL;
  for (char *line = strtok_r(run.out.data, "\n", &save); line;
       line = strtok_r(NULL, "\n", &save)) {
    int prefix_rank = -1, r = -1;
    char v[128], k[128], s[16], lr[16], ls[16], x[16];
    cr_assert_eq(sscanf(line, "[%d]: R=%d", &prefix_rank, &r), 2, "line: %s", line);
    cr_assert(r >= 0 && r < 4 && !seen[r], "bad or repeated rank in: %s", line);
    cr_assert_eq(prefix_rank, r, "prefix does not match the rank: %s", line);
    seen[r] = 1;
    cr_assert_eq(field(line, "S=", s, sizeof s), 0);
    cr_assert_str_eq(s, "4");
    cr_assert_eq(field(line, "LR=", lr, sizeof lr), 0);
    cr_assert_eq(atoi(lr), r);
    cr_assert_eq(field(line, "LS=", ls, sizeof ls), 0);
    cr_assert_str_eq(ls, "4");
    cr_assert_eq(field(line, "X=", x, sizeof x), 0);
    cr_assert_str_eq(x, "kept", "other variables must pass through");
    cr_assert_eq(field(line, "V=", v, sizeof v), 0);
    cr_assert_eq(field(line, "K=", k, sizeof k), 0);
    cr_assert(strncmp(v, "127.0.0.1:", 10) == 0, "rendezvous %s", v);
    int port = atoi(v + 10);
    cr_assert(port > 0 && port < 65536, "rendezvous %s", v);
    cr_assert(is_hex64(k), "secret '%s' is not 64 hex digits", k);
    if (first_v[0] == '\0') {
      strcpy(first_v, v);
      strcpy(first_k, k);
    }
    cr_assert_str_eq(v, first_v, "all ranks share the rendezvous");
    cr_assert_str_eq(k, first_k, "all ranks share the secret");
  }
  for (int r = 0; r < 4; r++) cr_assert(seen[r], "rank %d printed nothing", r);
  run_free(&run);
}

static void secret_of_one_launch(char *out, size_t size) {
  run_t run = {.args = {"-np", "1", "/bin/sh", "-c", "echo \"K=$PLAIT_SECRET\""}};
  run_plaitrun(&run);
  cr_assert_eq(run.exit_code, 0);
  cr_assert_eq(field(run.out.data, "K=", out, size), 0, "out: %s", run.out.data);
  cr_assert(is_hex64(out));
  run_free(&run);
}

Test(plaitrun, secret_is_fresh_for_every_launch, .timeout = 90) {
  char a[128], b[128];
  secret_of_one_launch(a, sizeof a);
  secret_of_one_launch(b, sizeof b);
  cr_assert_str_neq(a, b);
}

Test(plaitrun, user_secret_and_rendezvous_are_kept, .timeout = 90) {
  run_t run = {.args = {"-np", "2", "/bin/sh", "-c", "echo \"V=$PLAIT_RENDEZVOUS K=$PLAIT_SECRET\""},
               .env = {"PLAIT_SECRET=mysecret", "PLAIT_RENDEZVOUS=10.1.2.3:4567"}};
  run_plaitrun(&run);
  cr_assert_eq(run.exit_code, 0);
  cr_assert_not_null(strstr(run.out.data, "[0]: V=10.1.2.3:4567 K=mysecret\n"), "%s", run.out.data);
  cr_assert_not_null(strstr(run.out.data, "[1]: V=10.1.2.3:4567 K=mysecret\n"), "%s", run.out.data);
  run_free(&run);
}

Test(plaitrun, stdout_and_stderr_lines_are_prefixed_by_rank, .timeout = 90) {
  run_t run = {.args = {"-np", "3", "--", "/bin/sh", "-c",
                        "echo out$PLAIT_RANK; echo err$PLAIT_RANK >&2; echo second$PLAIT_RANK"}};
  run_plaitrun(&run);
  cr_assert_eq(run.exit_code, 0);
  const char *expect_out[] = {"[0]: out0\n", "[1]: out1\n", "[2]: out2\n", "[2]: second2\n"};
  for (size_t i = 0; i < 4; i++)
    cr_assert_not_null(strstr(run.out.data, expect_out[i]), "missing %s in:\n%s",
                       expect_out[i], run.out.data);
  for (int r = 0; r < 3; r++) {
    char line[32];
    snprintf(line, sizeof line, "[%d]: err%d\n", r, r);
    cr_assert_not_null(strstr(run.err.data, line), "missing %s in stderr:\n%s", line, run.err.data);
    cr_assert_null(strstr(run.out.data, line), "stderr line went to stdout");
  }
  cr_assert_eq(count_lines(&run.out), 6);
  run_free(&run);
}

Test(plaitrun, partial_last_line_is_flushed_with_newline, .timeout = 90) {
  run_t run = {.args = {"-n", "1", "/bin/sh", "-c", "printf 'first\\nno newline'"}};
  run_plaitrun(&run);
  cr_assert_eq(run.exit_code, 0);
  cr_assert_str_eq(run.out.data, "[0]: first\n[0]: no newline\n");
  run_free(&run);
}

Test(plaitrun, very_long_line_is_written_in_pieces, .timeout = 90) {
  run_t run = {.args = {"--np=1", "/bin/sh", "-c", "head -c 200000 /dev/zero | tr '\\0' x; echo"}};
  run_plaitrun(&run);
  cr_assert_eq(run.exit_code, 0);
  size_t xs = 0, lines = 0;
  char *save = NULL;
  for (char *line = strtok_r(run.out.data, "\n", &save); line;
       line = strtok_r(NULL, "\n", &save)) {
    cr_assert(strncmp(line, "[0]: ", 5) == 0, "every piece is prefixed");
    size_t n = strlen(line + 5);
    cr_assert_leq(n, 65536, "a piece of %zu bytes", n);
    cr_assert_eq(strspn(line + 5, "x"), n);
    xs += n;
    lines++;
  }
  cr_assert_eq(xs, 200000);
  cr_assert_geq(lines, 4);
  run_free(&run);
}

Test(plaitrun, no_prefix_passes_output_through, .timeout = 90) {
  const char *flags[] = {"--no-prefix", "--prefix=0"};
  for (int i = 0; i < 2; i++) {
    run_t run = {.args = {"-np", "1", flags[i], "/bin/sh", "-c", "printf 'a\\nb'; printf e >&2"}};
    run_plaitrun(&run);
    cr_assert_eq(run.exit_code, 0);
    cr_assert_str_eq(run.out.data, "a\nb", "%s", flags[i]);
    cr_assert_str_eq(run.err.data, "e", "%s", flags[i]);
    run_free(&run);
  }
}

Test(plaitrun, stdin_goes_to_rank_0_only, .timeout = 90) {
  run_t run = {.args = {"-np", "2", "/bin/sh", "-c", "cat"}, .stdin_text = "typed\n"};
  run_plaitrun(&run);
  cr_assert_eq(run.exit_code, 0);
  cr_assert_str_eq(run.out.data, "[0]: typed\n");
  run_free(&run);
}

Test(plaitrun, all_ranks_succeed_exit_0, .timeout = 90) {
  run_t run = {.args = {"-np", "16", "true"}};
  run_plaitrun(&run);
  cr_assert_eq(run.exit_code, 0, "stderr: %s", run.err.data);
  cr_assert_str_eq(run.err.data, "");
  run_free(&run);
}

Test(plaitrun, single_rank_status_is_plaitruns, .timeout = 90) {
  run_t run = {.args = {"-np", "1", "/bin/sh", "-c", "exit 7"}};
  run_plaitrun(&run);
  cr_assert_eq(run.exit_code, 7);
  cr_assert_not_null(strstr(run.err.data, "rank 0 exited with status 7"), "%s", run.err.data);
  run_free(&run);
}

Test(plaitrun, failing_rank_stops_the_others, .timeout = 90) {
  run_t run = {.args = {"-np", "3", "/bin/sh", "-c",
                        "if [ \"$PLAIT_RANK\" = 2 ]; then sleep 0.2; exit 3; fi; sleep 30"}};
  run_plaitrun(&run);
  cr_assert_eq(run.exit_code, 3, "stderr: %s", run.err.data);
  cr_assert_lt(run.elapsed_s, 10.0, "the sleeping ranks were not stopped");
  cr_assert_not_null(strstr(run.err.data, "rank 2 exited with status 3; stopping the other ranks"),
                     "%s", run.err.data);
  run_free(&run);
}

Test(plaitrun, rank_killed_by_signal_gives_128_plus_signal, .timeout = 90) {
  run_t run = {.args = {"-np", "2", "/bin/sh", "-c",
                        "if [ \"$PLAIT_RANK\" = 1 ]; then kill -KILL $$; fi; sleep 30"}};
  run_plaitrun(&run);
  cr_assert_eq(run.exit_code, 128 + SIGKILL, "stderr: %s", run.err.data);
  cr_assert_lt(run.elapsed_s, 10.0);
  cr_assert_not_null(strstr(run.err.data, "rank 1 was killed by signal 9"), "%s", run.err.data);
  run_free(&run);
}

Test(plaitrun, ranks_ignoring_sigterm_are_killed_after_grace, .timeout = 90) {
  run_t run = {.args = {"-np", "2", "--grace", "0.5", "/bin/sh", "-c",
                        "trap '' TERM; if [ \"$PLAIT_RANK\" = 1 ]; then sleep 0.2; exit 5; fi; "
                        "sleep 30"}};
  run_plaitrun(&run);
  cr_assert_eq(run.exit_code, 5, "stderr: %s", run.err.data);
  cr_assert_lt(run.elapsed_s, 10.0);
  cr_assert_not_null(strstr(run.err.data, "SIGKILL"), "%s", run.err.data);
  run_free(&run);
}

/* Ranks print their pid and sleep; plaitrun gets signo once both printed. */
static void check_signal_stops_job(int signo) {
  run_t run = {.args = {"-np", "2", "/bin/sh", "-c", "echo $$; exec sleep 30"},
               .signo = signo, .signal_after_lines = 2};
  run_plaitrun(&run);
  cr_assert_eq(run.exit_code, 128 + signo, "stderr: %s", run.err.data);
  cr_assert_lt(run.elapsed_s, 10.0);
  int pids = 0;
  char *save = NULL;
  for (char *line = strtok_r(run.out.data, "\n", &save); line;
       line = strtok_r(NULL, "\n", &save)) {
    int rank = -1, pid = -1;
    cr_assert_eq(sscanf(line, "[%d]: %d", &rank, &pid), 2, "line: %s", line);
    errno = 0;
    cr_assert(kill(pid, 0) != 0 && errno == ESRCH, "rank %d (pid %d) is still alive", rank, pid);
    pids++;
  }
  cr_assert_eq(pids, 2);
  run_free(&run);
}

Test(plaitrun, sigterm_is_forwarded_and_exits_143, .timeout = 90) {
  check_signal_stops_job(SIGTERM);
}

Test(plaitrun, sigint_is_forwarded_and_exits_130, .timeout = 90) {
  check_signal_stops_job(SIGINT);
}

Test(plaitrun, command_not_found_exits_127, .timeout = 90) {
  run_t run = {.args = {"-np", "2", "plaitrun-test-no-such-command", "arg"}};
  run_plaitrun(&run);
  cr_assert_eq(run.exit_code, 127);
  cr_assert_not_null(strstr(run.err.data, "plaitrun-test-no-such-command"), "%s", run.err.data);
  cr_assert_not_null(strstr(run.err.data, strerror(ENOENT)), "%s", run.err.data);
  run_free(&run);
}

typedef struct bad_args_case {
  const char *args[9];
  const char *message; /* must appear on stderr */
} bad_args_case_t;

Test(plaitrun, bad_arguments_exit_2_naming_the_problem, .timeout = 90) {
  static const bad_args_case_t cases[] = {
      {{"-np", "0", "true"}, "-np '0'"},
      {{"-np", "1025", "true"}, "-np '1025'"},
      {{"-np", "two", "true"}, "-np 'two'"},
      {{"-np", "4x", "true"}, "-np '4x'"},
      {{"-np"}, "'-np' needs a value"},
      {{"true"}, "missing -np"},
      {{"-np", "2"}, "missing the command"},
      {{"-np", "2", "--bogus", "true"}, "unknown option '--bogus'"},
      {{"-np", "2", "--grace", "soon", "true"}, "--grace 'soon'"},
      {{"-np", "2", "--prefix=maybe", "true"}, "--prefix='maybe'"},
      {{"-np", "2", "-np", "3", "true"}, "twice"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    run_t run = {0};
    memcpy(run.args, cases[i].args, sizeof cases[i].args);
    run_plaitrun(&run);
    cr_assert_eq(run.exit_code, 2, "case %zu: exit %d", i, run.exit_code);
    cr_assert_not_null(strstr(run.err.data, cases[i].message), "case %zu: stderr: %s", i,
                       run.err.data);
    cr_assert_not_null(strstr(run.err.data, "--help"), "case %zu: no usage hint", i);
    cr_assert_str_eq(run.out.data, "");
    run_free(&run);
  }
}

Test(plaitrun, help_lists_every_option, .timeout = 90) {
  run_t run = {.args = {"--help"}};
  run_plaitrun(&run);
  cr_assert_eq(run.exit_code, 0);
  const char *options[] = {"-np N", "-n N", "--np N", "--grace", "--no-prefix",
                           "--prefix=", "--help-env", "--version", "--help", "--min-np N",
                           "--max-np N", "--host-discovery-script", "--slots-per-host",
                           "--elastic-timeout", "--reset-limit",
                           "--blacklist-cooldown-range MIN MAX"};
  for (size_t i = 0; i < sizeof options / sizeof options[0]; i++)
    cr_assert_not_null(strstr(run.out.data, options[i]), "--help lacks %s", options[i]);
  run_free(&run);
}

Test(plaitrun, version_names_plaitrun_and_libplait, .timeout = 90) {
  run_t run = {.args = {"--version"}};
  run_plaitrun(&run);
  cr_assert_eq(run.exit_code, 0);
  cr_assert_not_null(strstr(run.out.data, "plaitrun "), "%s", run.out.data);
  cr_assert_not_null(strstr(run.out.data, "libplait "), "%s", run.out.data);
  run_free(&run);
}

Test(plaitrun, help_env_lists_libplait_variables, .timeout = 90) {
  run_t run = {.args = {"--help-env"}};
  run_plaitrun(&run);
  cr_assert_eq(run.exit_code, 0, "stderr: %s", run.err.data);
  cr_assert_not_null(strstr(run.out.data, "PLAIT_TRANSPORT"), "%s", run.out.data);
  cr_assert_not_null(strstr(run.out.data, "PLAIT_FUSION_THRESHOLD"), "%s", run.out.data);
  run_free(&run);
}

/* What --help-env says is true: no transport that has no plugin, no setting
 * that does nothing, and where the plugins' variables are. */
Test(plaitrun, help_env_promises_nothing_unbuilt, .timeout = 90) {
  run_t run = {.args = {"--help-env"}};
  run_plaitrun(&run);
  cr_assert_eq(run.exit_code, 0, "stderr: %s", run.err.data);
  /* nccl is named only as a plugin that exists where CUDA and NCCL do */
  const char *nccl = strstr(run.out.data, "nccl");
  if (nccl) cr_expect_not_null(strstr(nccl, "built only where CUDA and NCCL are found"), "%s", nccl);
  cr_expect_null(strstr(run.out.data, "online"), "%s", run.out.data);
  const char *autotune = strstr(run.out.data, "PLAIT_AUTOTUNE");
  cr_assert_not_null(autotune, "%s", run.out.data);
  cr_expect_null(strstr(autotune, "not implemented"), "%s", autotune);
  cr_expect_not_null(strstr(run.out.data, "PLAIT_OFI_*"), "%s", run.out.data);
  run_free(&run);
}

/* ------------------------------------------------------------------------ */
/* horovodrun's flags (src/plaitrun/horovod_flags.c)                         */
/* ------------------------------------------------------------------------ */

#define HVD_ENV_SCRIPT                                                                       \
  "echo \"FT=$HOROVOD_FUSION_THRESHOLD CT=$HOROVOD_CYCLE_TIME CC=$HOROVOD_CACHE_CAPACITY "    \
  "TL=$HOROVOD_TIMELINE LL=$HOROVOD_LOG_LEVEL SD=$HOROVOD_STALL_CHECK_DISABLE "              \
  "GT=$HOROVOD_GLOO_TIMEOUT_SECONDS ST=$HOROVOD_START_TIMEOUT TR=$PLAIT_TRANSPORT "          \
  "PF=${PLAIT_FUSION_THRESHOLD-unset} PS=${PLAIT_STALL_WARN_S-unset}\""

Test(plaitrun, horovodrun_flags_set_what_horovodrun_sets, .timeout = 90) {
  run_t run = {.args = {"-np", "2", "-H", "localhost:2", "--fusion-threshold-mb", "32",
                        "--cycle-time-ms", "2.5", "--cache-capacity=7", "--timeline-filename",
                        "tl.json", "--log-level", "info", "--no-stall-check",
                        "--gloo-timeout-seconds", "40", "--start-timeout", "50", "--gloo",
                        "/bin/sh", "-c", HVD_ENV_SCRIPT},
               .env = {"PLAIT_FUSION_THRESHOLD=1M", "PLAIT_STALL_WARN_S=5",
                       "PLAIT_TRANSPORT=ofi"}};
  run_plaitrun(&run);
  cr_assert_eq(run.exit_code, 0, "stderr: %s", run.err.data);
  const char *want = "FT=33554432 CT=2.5 CC=7 TL=tl.json LL=INFO SD=1 GT=40 ST=50 TR=gloo "
                     "PF=unset PS=unset\n";
  for (int r = 0; r < 2; r++) {
    char line[512];
    snprintf(line, sizeof line, "[%d]: %s", r, want);
    cr_expect_not_null(strstr(run.out.data, line), "want %s in:\n%s", line, run.out.data);
  }
  /* the flag wins over the environment, as under horovodrun, and says so */
  cr_expect_not_null(strstr(run.err.data, "--fusion-threshold-mb overrides "
                                          "PLAIT_FUSION_THRESHOLD=1M"), "%s", run.err.data);
  cr_expect_not_null(strstr(run.err.data, "--gloo overrides PLAIT_TRANSPORT=ofi"), "%s",
                     run.err.data);
  run_free(&run);
}

/* horovodrun's autotune flags set Horovod's variables, which plait maps to
 * PLAIT_AUTOTUNE* (the flag wins over PLAIT_AUTOTUNE in the environment). */
Test(plaitrun, horovodrun_autotune_flags_set_horovods_variables, .timeout = 90) {
  run_t run = {.args = {"-np", "2", "-H", "localhost:2", "--autotune", "--autotune-log-file",
                        "at.csv", "--autotune-warmup-samples", "2", "--autotune-steps-per-sample",
                        "5", "--autotune-bayes-opt-max-samples", "30", "/bin/sh", "-c",
                        "echo \"AT=$HOROVOD_AUTOTUNE AL=$HOROVOD_AUTOTUNE_LOG "
                        "AW=$HOROVOD_AUTOTUNE_WARMUP_SAMPLES AS=$HOROVOD_AUTOTUNE_STEPS_PER_SAMPLE "
                        "AM=$HOROVOD_AUTOTUNE_BAYES_OPT_MAX_SAMPLES P=${PLAIT_AUTOTUNE-unset}\""},
               .env = {"PLAIT_AUTOTUNE=0"}};
  run_plaitrun(&run);
  cr_assert_eq(run.exit_code, 0, "stderr: %s", run.err.data);
  cr_expect_not_null(strstr(run.out.data, "[1]: AT=1 AL=at.csv AW=2 AS=5 AM=30 P=unset\n"),
                     "%s", run.out.data);
  run_free(&run);
}

/* --thread-affinity sets HOROVOD_THREAD_AFFINITY, which plait takes as
 * PLAIT_THREAD_AFFINITY (the flag wins over PLAIT_THREAD_AFFINITY). */
Test(plaitrun, horovodrun_thread_affinity_flag_sets_horovods_variable, .timeout = 90) {
  run_t run = {.args = {"-np", "2", "-H", "localhost:2", "--thread-affinity", "0,1", "/bin/sh",
                        "-c", "echo \"TA=$HOROVOD_THREAD_AFFINITY P=${PLAIT_THREAD_AFFINITY-unset}\""},
               .env = {"PLAIT_THREAD_AFFINITY=3,4"}};
  run_plaitrun(&run);
  cr_assert_eq(run.exit_code, 0, "stderr: %s", run.err.data);
  cr_expect_not_null(strstr(run.out.data, "[1]: TA=0,1 P=unset\n"), "%s", run.out.data);
  run_free(&run);
}

/* --hierarchical-allreduce sets HOROVOD_HIERARCHICAL_ALLREDUCE=1 (plait
 * takes it as PLAIT_HIERARCHICAL_ALLREDUCE, which the flag overrides);
 * --no-hierarchical-allreduce sets it to 0; the same for the allgather. */
Test(plaitrun, horovodrun_hierarchical_allreduce_flag_sets_horovods_variable, .timeout = 90) {
  const char *flags[] = {"--hierarchical-allreduce", "--no-hierarchical-allreduce",
                         "--hierarchical-allgather", "--no-hierarchical-allgather"};
  const char *want[] = {"[1]: HA=1 P=unset\n", "[1]: HA=0 P=unset\n", "[1]: HG=1 PG=unset\n",
                        "[1]: HG=0 PG=unset\n"};
  for (int i = 0; i < 4; i++) {
    run_t run = {.args = {"-np", "2", "-H", "localhost:2", flags[i], "/bin/sh", "-c",
                          "echo \"HA=$HOROVOD_HIERARCHICAL_ALLREDUCE "
                          "P=${PLAIT_HIERARCHICAL_ALLREDUCE-unset}\"; "
                          "echo \"HG=$HOROVOD_HIERARCHICAL_ALLGATHER "
                          "PG=${PLAIT_HIERARCHICAL_ALLGATHER-unset}\""},
                 .env = {"PLAIT_HIERARCHICAL_ALLREDUCE=auto", "PLAIT_HIERARCHICAL_ALLGATHER=auto"}};
    run_plaitrun(&run);
    cr_assert_eq(run.exit_code, 0, "%s: stderr: %s", flags[i], run.err.data);
    cr_expect_not_null(strstr(run.out.data, want[i]), "%s: %s", flags[i], run.out.data);
    run_free(&run);
  }
}

Test(plaitrun, horovodrun_flags_without_effect_are_accepted, .timeout = 90) {
  run_t run = {.args = {"--num-proc", "2", "--disable-cache", "-p", "22", "-i", "/no/key",
                        "--network-interface", "lo", "--no-hierarchical-allreduce",
                        "--no-autotune", "--tcp",
                        "--mpi-threads-disable", "--log-without-timestamp",
                        "--timeline-mark-cycles", "--verbose", "--stall-check", "/bin/sh", "-c",
                        "echo ok$PLAIT_RANK"}};
  run_plaitrun(&run);
  cr_assert_eq(run.exit_code, 0, "stderr: %s", run.err.data);
  cr_expect_not_null(strstr(run.out.data, "[1]: ok1\n"), "%s", run.out.data);
  /* --verbose says what each flag did */
  cr_expect_not_null(strstr(run.err.data, "--stall-check: HOROVOD_STALL_CHECK_DISABLE=0"), "%s",
                     run.err.data);
  run_free(&run);
}

Test(plaitrun, horovodrun_flags_plait_cannot_honour_exit_2_with_why, .timeout = 90) {
  static const bad_args_case_t cases[] = {
      {{"-np", "2", "--mpi", "true"}, "--mpi is not supported: plait does not use MPI"},
      {{"-np", "2", "--autotune-gaussian-process-noise", "0.8", "true"},
       "--autotune-gaussian-process-noise is not supported: plait's autotuner searches a grid"},
      {{"-np", "2", "--autotune-steps-per-sample", "0", "true"}, "--autotune-steps-per-sample '0'"},
      {{"-np", "2", "--reset-limit", "1", "true"}, "--reset-limit needs elastic mode"},
      {{"--min-np", "0", "-H", "localhost:2", "true"}, "--min-np '0': expected a whole number"},
      {{"--min-np", "3", "--max-np", "2", "-H", "localhost:4", "true"},
       "--max-np 2 is below --min-np 3"},
      {{"-np", "1", "--min-np", "2", "-H", "localhost:4", "true"}, "-np 1 is below --min-np 2"},
      {{"--min-np", "2", "true"}, "elastic mode needs --host-discovery-script PATH or -H"},
      {{"--max-np", "2", "-H", "localhost:2", "true"}, "elastic mode needs --min-np N"},
      {{"--min-np", "1", "--host-discovery-script", "x", "--blacklist-cooldown-range", "9", "2",
        "true"}, "--blacklist-cooldown-range 9 2: MIN is above MAX"},
      {{"--min-np", "1", "--host-discovery-script", "x", "--blacklist-cooldown-range", "0", "10",
        "true"}, "--blacklist-cooldown-range '0' '10': expected two whole numbers"},
      {{"--min-np", "1", "--host-discovery-script", "x", "--elastic-timeout", "soon", "true"},
       "--elastic-timeout 'soon'"},
      {{"--min-np", "1", "--host-discovery-script", "x", "--slots-per-host", "0", "true"},
       "--slots-per-host '0'"},
      {{"--min-np", "1", "--host-discovery-script", "x", "--reset-limit", "-1", "true"},
       "--reset-limit '-1'"},
      {{"-np", "2", "--config-file", "c.yaml", "true"}, "--config-file is not supported"},
      {{"-np", "2", "--mpi-args=-x", "true"}, "--mpi-args is not supported"},
      {{"-np", "2", "--num-nccl-streams", "2", "true"}, "one stream per device"},
      {{"-np", "2", "-H", "-oProxyCommand=x:2", "true"}, "is not a host name"},
      {{"-np", "2", "-H", "a;b:2", "true"}, "'a;b' is not a host name"},
      {{"-np", "3", "-H", "localhost:2", "true"}, "-np 3 is more than the 2 slots"},
      {{"-np", "2", "-H", "localhost", "true"}, "has no slot count"},
      {{"-np", "2", "--fusion-threshold-mb", "-1", "true"}, "--fusion-threshold-mb '-1'"},
      {{"-np", "2", "--cycle-time-ms", "fast", "true"}, "--cycle-time-ms 'fast'"},
      {{"-np", "2", "--log-level", "loud", "true"}, "--log-level 'loud'"},
      {{"-np", "2", "--hostfile", "/nonexistent/hosts", "true"}, "--hostfile /nonexistent/hosts"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    run_t run = {0};
    memcpy(run.args, cases[i].args, sizeof cases[i].args);
    run_plaitrun(&run);
    cr_expect_eq(run.exit_code, 2, "case %zu: exit %d", i, run.exit_code);
    cr_expect_not_null(strstr(run.err.data, cases[i].message), "case %zu: stderr: %s", i,
                       run.err.data);
    cr_expect_str_eq(run.out.data, "", "case %zu", i);
    run_free(&run);
  }
}

Test(plaitrun, hostfile_of_this_host, .timeout = 90) {
  char path[] = "/tmp/plaitrun_hostfile_XXXXXX";
  int fd = mkstemp(path);
  cr_assert_geq(fd, 0);
  const char *text = "# this host\nlocalhost slots=2\n";
  cr_assert_eq(write(fd, text, strlen(text)), (ssize_t)strlen(text));
  close(fd);
  run_t run = {.args = {"-np", "2", "-hostfile", path, "/bin/sh", "-c", "echo ok$PLAIT_RANK"}};
  run_plaitrun(&run);
  cr_expect_eq(run.exit_code, 0, "stderr: %s", run.err.data);
  run_free(&run);
  run_t more = {.args = {"-np", "3", "--hostfile", path, "true"}};
  run_plaitrun(&more);
  cr_expect_eq(more.exit_code, 2);
  cr_expect_not_null(strstr(more.err.data, "-np 3 is more than the 2 slots"), "%s", more.err.data);
  run_free(&more);
  unlink(path);
}

static char *slurp_file(const char *path) {
  FILE *f = fopen(path, "r");
  if (!f) return NULL;
  static char buf[4096];
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  buf[n] = '\0';
  fclose(f);
  return buf;
}

Test(plaitrun, output_filename_writes_each_ranks_streams, .timeout = 90) {
  char dir[] = "/tmp/plaitrun_out_XXXXXX";
  cr_assert_not_null(mkdtemp(dir));
  char out_dir[256];
  snprintf(out_dir, sizeof out_dir, "%s/logs", dir); /* created by plaitrun */
  run_t run = {.args = {"-np", "11", "--output-filename", out_dir, "/bin/sh", "-c",
                        "echo out$PLAIT_RANK; echo err$PLAIT_RANK >&2"}};
  run_plaitrun(&run);
  cr_assert_eq(run.exit_code, 0, "stderr: %s", run.err.data);
  cr_expect_str_eq(run.out.data, "", "output goes to the files");
  /* ranks padded to the width of the last one, as horovodrun does */
  char path[512];
  snprintf(path, sizeof path, "%s/rank.03/stdout", out_dir);
  char *text = slurp_file(path);
  cr_expect_not_null(text, "%s missing", path);
  if (text) cr_expect_str_eq(text, "out3\n");
  snprintf(path, sizeof path, "%s/rank.10/stderr", out_dir);
  text = slurp_file(path);
  cr_expect_not_null(text, "%s missing", path);
  if (text) cr_expect_str_eq(text, "err10\n");
  run_free(&run);
  char cmd[600];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  cr_expect_eq(system(cmd), 0);
}

Test(plaitrun, check_build_and_short_version, .timeout = 90) {
  run_t run = {.args = {"-cb"}};
  run_plaitrun(&run);
  cr_assert_eq(run.exit_code, 0, "stderr: %s", run.err.data);
  /* horovodrun's layout, with where each plugin was found (the build's lib/) */
  cr_expect_eq(strncmp(run.out.data, "plait v", 7), 0, "%s", run.out.data);
  cr_expect_not_null(strstr(run.out.data, ":\n\nAvailable Frameworks:\n    ["), "%s",
                     run.out.data);
  cr_expect_not_null(strstr(run.out.data, "\nAvailable Tensor Operations:\n"), "%s", run.out.data);
  cr_expect_not_null(strstr(run.out.data, "    [X] Gloo: " PLAIT_TEST_LIB_DIR), "%s", run.out.data);
  run_free(&run);
  run_t v = {.args = {"-v"}};
  run_plaitrun(&v);
  cr_assert_eq(v.exit_code, 0);
  cr_expect_not_null(strstr(v.out.data, "libplait "), "%s", v.out.data);
  run_free(&v);
}

/* End to end: a real job (examples/fusion.c) started the horovodrun way; the
 * flag must change what the coordinator did. */
static void fusion_job(const char *mb, char **out) {
  run_t run = {.args = {"-np", "2", "-H", "localhost:2", "--fusion-threshold-mb", mb,
                        "--cycle-time-ms", "50", PLAIT_TEST_BIN_DIR "/fusion", "-k", "40", "-s",
                        "4096", "-n", "2", "-w", "1"}};
  run_plaitrun(&run);
  cr_assert_eq(run.exit_code, 0, "stderr: %s\nstdout: %s", run.err.data, run.out.data);
  *out = strdup(run.out.data);
  run_free(&run);
}

Test(plaitrun, fusion_threshold_flag_takes_effect_in_a_real_job, .timeout = 120) {
  char *off, *on;
  fusion_job("0", &off);
  cr_expect_not_null(strstr(off, "threshold 0, cycle 50 ms"), "%s", off);
  cr_expect_not_null(strstr(off, "per batch        40.0 collectives, 0.0 fused"), "%s", off);
  fusion_job("64", &on);
  cr_expect_not_null(strstr(on, "threshold 67108864, cycle 50 ms"), "%s", on);
  cr_expect_null(strstr(on, " 0.0 fused"), "64 MiB must fuse:\n%s", on);
  free(off);
  free(on);
}

Test(plaitrun, help_env_says_which_horovod_variables_are_taken, .timeout = 90) {
  run_t run = {.args = {"--help-env"}, .env = {"HOROVOD_CYCLE_TIME=2.5"}};
  run_plaitrun(&run);
  cr_assert_eq(run.exit_code, 0, "stderr: %s", run.err.data);
  cr_expect_not_null(strstr(run.out.data, "HOROVOD_CYCLE_TIME=2.5 taken as PLAIT_CYCLE_TIME_MS=2.5"),
                     "%s", run.out.data);
  run_free(&run);
}

/* A whole file, malloc'd; NULL when it cannot be read. */
static char *read_whole(const char *path) {
  FILE *f = fopen(path, "r");
  if (!f) return NULL;
  char *buf = NULL;
  size_t len = 0, cap = 0, n;
  char chunk[4096];
  while ((n = fread(chunk, 1, sizeof chunk, f)) > 0) {
    if (len + n + 1 > cap) {
      cap = (len + n + 1) * 2;
      char *grown = realloc(buf, cap);
      if (!grown) break;
      buf = grown;
    }
    memcpy(buf + len, chunk, n);
    len += n;
  }
  fclose(f);
  if (buf) buf[len] = '\0';
  return buf;
}

/* -H naming another host: its ranks start through PLAITRUN_SSH (here a fake
 * ssh that logs its arguments and runs the remote command with sh), with
 * their host's local rank and size, and the secret arrives on stdin, never
 * on a command line. tests/tools/hosts/run.sh does the same with a real sshd. */
/* A fake ssh in dir: logs its arguments (one line per call) to dir/argv,
 * skips its options up to "--" and the host, and runs the remote command
 * with sh, as sshd would; PLAITRUN_SSH for it goes into env_ssh. */
static void make_fake_ssh(char *dir, char *env_ssh, size_t cap) {
  cr_assert_not_null(mkdtemp(dir));
  char ssh[256];
  snprintf(ssh, sizeof ssh, "%s/fake_ssh", dir);
  FILE *f = fopen(ssh, "w");
  cr_assert_not_null(f);
  fprintf(f, "#!/bin/sh\nprintf '%%s\\n' \"$*\" >> %s/argv\n"
             "while [ \"$1\" != -- ]; do shift; done\nshift; shift\nexec sh -c \"$1\"\n", dir);
  fclose(f);
  cr_assert_eq(chmod(ssh, 0755), 0);
  snprintf(env_ssh, cap, "PLAITRUN_SSH=%s -o LogLevel=ERROR", ssh);
}

static void remove_fake_ssh(const char *dir) {
  char path[256];
  snprintf(path, sizeof path, "%s/fake_ssh", dir);
  unlink(path);
  snprintf(path, sizeof path, "%s/argv", dir);
  unlink(path);
  rmdir(dir);
}

/* -H naming another host: its ranks start through PLAITRUN_SSH (here a fake
 * ssh), with their host's local rank and size, and the secret arrives on
 * stdin, never on a command line. tests/tools/hosts/run.sh does the same with a
 * real sshd. */
Test(plaitrun, other_hosts_start_over_ssh_with_the_secret_on_stdin, .timeout = 90) {
  char dir[] = "/tmp/plaitrun_ssh_XXXXXX", env_ssh[300], log[300];
  make_fake_ssh(dir, env_ssh, sizeof env_ssh);
  snprintf(log, sizeof log, "%s/argv", dir);
  static const char secret[] = "PLAIT_SECRET=0123456789abcdef0123456789abcdef";
  run_t run = {.args = {"-np", "3", "-H", "localhost:1,node-b:2", "/bin/sh", "-c",
                        "echo r$PLAIT_RANK l$PLAIT_LOCAL_RANK/$PLAIT_LOCAL_SIZE "
                        "s$PLAIT_SECRET"},
               .env = {env_ssh, secret}};
  run_plaitrun(&run);
  cr_assert_eq(run.exit_code, 0, "stderr: %s", run.err.data);
  cr_expect_not_null(strstr(run.out.data, "[0]: r0 l0/1 s0123456789abcdef"), "%s", run.out.data);
  cr_expect_not_null(strstr(run.out.data, "[1]: r1 l0/2 s0123456789abcdef"), "%s", run.out.data);
  cr_expect_not_null(strstr(run.out.data, "[2]: r2 l1/2 s0123456789abcdef"), "%s", run.out.data);
  char *argv_log = read_whole(log);
  cr_assert_not_null(argv_log);
  cr_expect_not_null(strstr(argv_log, "-T -o BatchMode=yes -- node-b "), "%s", argv_log);
  cr_expect_null(strstr(argv_log, "0123456789abcdef"), "the secret is on ssh's command line");
  size_t lines = 0;
  for (const char *c = argv_log; *c; c++) lines += *c == '\n';
  cr_expect_eq(lines, 2, "one ssh per rank on node-b: %s", argv_log);
  free(argv_log);
  run_free(&run);
  remove_fake_ssh(dir);
}

/* PLAITRUN_AGENT replaces ssh for every host, this one too: the agent gets
 * HOST and the remote command (no ssh options), the secret on stdin. Here
 * the agent is a script that logs its arguments and runs the command with
 * sh; srun and plait.ray's and plait.spark's relays are real agents. */
Test(plaitrun, an_agent_starts_every_rank_this_hosts_too, .timeout = 90) {
  char dir[] = "/tmp/plaitrun_agent_XXXXXX", env_agent[300], log[300], agent[256];
  cr_assert_not_null(mkdtemp(dir));
  snprintf(agent, sizeof agent, "%s/agent", dir);
  snprintf(log, sizeof log, "%s/argv", dir);
  FILE *f = fopen(agent, "w");
  cr_assert_not_null(f);
  fprintf(f, "#!/bin/sh\nprintf '%%s\\n' \"$1\" >> %s\nexec sh -c \"$2\"\n", log);
  fclose(f);
  cr_assert_eq(chmod(agent, 0755), 0);
  snprintf(env_agent, sizeof env_agent, "PLAITRUN_AGENT=%s", agent);
  static const char secret[] = "PLAIT_SECRET=0123456789abcdef0123456789abcdef";
  run_t run = {.args = {"-np", "3", "-H", "localhost:1,node-b:2", "/bin/sh", "-c",
                        "echo r$PLAIT_RANK l$PLAIT_LOCAL_RANK/$PLAIT_LOCAL_SIZE "
                        "s$PLAIT_SECRET"},
               .env = {env_agent, secret}};
  run_plaitrun(&run);
  cr_assert_eq(run.exit_code, 0, "stderr: %s", run.err.data);
  cr_expect_not_null(strstr(run.out.data, "[0]: r0 l0/1 s0123456789abcdef"), "%s", run.out.data);
  cr_expect_not_null(strstr(run.out.data, "[2]: r2 l1/2 s0123456789abcdef"), "%s", run.out.data);
  char *argv_log = read_whole(log);
  cr_assert_not_null(argv_log);
  size_t local = 0, b = 0; /* the agents run at once: their lines come in any order */
  for (const char *c = argv_log; (c = strstr(c, "localhost\n")); c++) local++;
  for (const char *c = argv_log; (c = strstr(c, "node-b\n")); c++) b++;
  cr_expect(local == 1 && b == 2 && strlen(argv_log) == 24, "one agent call per rank, "
            "HOST first: %s", argv_log);
  free(argv_log);
  run_free(&run);
  unlink(agent);
  unlink(log);
  rmdir(dir);
}

/* 1 when pid is gone (or a zombie nobody will run again). */
static int process_gone(int pid) {
  char path[64], state = '?';
  snprintf(path, sizeof path, "/proc/%d/stat", pid);
  FILE *f = fopen(path, "r");
  if (!f) return 1;
  int ok = fscanf(f, "%*d (%*[^)]) %c", &state) == 1;
  fclose(f);
  return ok && state == 'Z';
}

/* plaitrun killed with SIGKILL: the rank it started over ssh is stopped by
 * the remote wrapper when its stdin ends (nothing else would: it runs in a
 * session of its own, out of reach of plaitrun's PR_SET_PDEATHSIG). */
Test(plaitrun, a_remote_rank_stops_when_plaitrun_dies, .timeout = 90) {
  char dir[] = "/tmp/plaitrun_ssh_XXXXXX", env_ssh[300];
  make_fake_ssh(dir, env_ssh, sizeof env_ssh);
  run_t run = {.args = {"-np", "1", "--grace", "0.5", "-H", "node-b:1", "/bin/sh", "-c",
                        "echo $$; while :; do sleep 1; done"},
               .env = {env_ssh}, .signo = SIGKILL, .signal_after_lines = 1};
  run_plaitrun(&run);
  int rank = -1, pid = -1;
  cr_assert_eq(sscanf(run.out.data, "[%d]: %d", &rank, &pid), 2, "%s", run.out.data);
  int gone = 0;
  for (int i = 0; i < 200 && !gone; i++) { /* 20 s at most; SIGTERM comes at once */
    gone = process_gone(pid);
    if (!gone) usleep(100000);
  }
  if (!gone) kill(pid, SIGKILL);
  cr_expect(gone, "the remote rank (pid %d) outlived plaitrun", pid);
  run_free(&run);
  remove_fake_ssh(dir);
}
