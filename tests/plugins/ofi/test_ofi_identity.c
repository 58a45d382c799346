/*
 * The identity a rank publishes for the ofi plugin's liveness check
 * (plugins/ofi/robustness/liveness.c): a peer's pid is checked only where its
 * start time reads alike. A process in another time namespace reads
 * /proc/<pid>/stat's start time shifted by its boot-time offset, so a live
 * peer there looked like a reused pid ("has exited (pid reused)"): every rank
 * of hosts_matrix_clock_ofi (time namespaces 1 h behind, 10 days ahead) named
 * live peers lost under load. Its identity now differs, and nobody checks it.
 */
#include <criterion/criterion.h>

#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "robustness/liveness.h"

#ifndef CLONE_NEWTIME
#define CLONE_NEWTIME 0x00000080
#endif

typedef struct {
  int64_t pid;
  uint64_t start, kernel;
} ident_t;

/* A child that publishes its identity, then waits until *hold is closed by
 * the parent; *peer: what it published. */
static pid_t spawn_peer(ident_t *peer, int *hold) {
  int up[2], h[2];
  cr_assert_eq(pipe(up), 0);
  cr_assert_eq(pipe(h), 0);
  pid_t child = fork();
  cr_assert_geq(child, 0);
  if (child == 0) {
    close(h[1]); /* the parent's close then ends the wait below */
    ident_t me;
    ofi_self_identity(&me.pid, &me.start, &me.kernel);
    ssize_t w = write(up[1], &me, sizeof me);
    char c;
    ssize_t r = read(h[0], &c, 1);
    _exit(w == (ssize_t)sizeof me && r >= 0 ? 0 : 1);
  }
  close(h[0]);
  close(up[1]);
  cr_assert_eq(read(up[0], peer, sizeof *peer), (ssize_t)sizeof *peer);
  close(up[0]);
  *hold = h[1];
  return child;
}

/* Lets the child end and checks it ended well. */
static void end_peer(pid_t child, int hold) {
  cr_assert_eq(close(hold), 0);
  int status = 0;
  waitpid(child, &status, 0);
  cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

Test(ofi_identity, a_peer_in_another_time_namespace_is_not_checked_by_pid, .timeout = 60) {
  if (unshare(CLONE_NEWTIME) != 0)
    cr_skip_test("no time namespace can be made here (unshare: %s)", strerror(errno));
  FILE *f = fopen("/proc/self/timens_offsets", "w"); /* the children's namespace */
  cr_assert_not_null(f, "timens_offsets: %s", strerror(errno));
  fprintf(f, "monotonic 3600 0\nboottime 3600 0\n");
  cr_assert_eq(fclose(f), 0, "setting the offsets: %s", strerror(errno));
  ident_t peer, me;
  int hold;
  pid_t child = spawn_peer(&peer, &hold); /* in the new time namespace */
  ofi_self_identity(&me.pid, &me.start, &me.kernel);
  /* what the check would have said of the live child had it been checked */
  ofi_peer_t rec = {0};
  rec.pid = peer.pid;
  rec.start_time = peer.start;
  rec.same_kernel = 1;
  char why[256] = "";
  int gone = ofi_peer_record_gone(&rec, why, sizeof why);
  end_peer(child, hold);
  cr_assert(gone && strstr(why, "pid reused"), "the case was not made: the live child's start "
            "time read alike across time namespaces (%s)", why);
  cr_assert_neq(peer.kernel, me.kernel, "a process in another time namespace has the same "
                "identity: its pid would be checked, and it would be named lost while it runs");
}

Test(ofi_identity, a_peer_in_the_same_namespaces_is_checked_and_alive, .timeout = 60) {
  ident_t peer, me;
  int hold;
  pid_t child = spawn_peer(&peer, &hold);
  ofi_self_identity(&me.pid, &me.start, &me.kernel);
  cr_assert_eq(peer.kernel, me.kernel, "same boot, pid and time namespace: the same identity");
  ofi_peer_t rec = {0};
  rec.pid = peer.pid;
  rec.start_time = peer.start;
  rec.same_kernel = 1;
  char why[256] = "";
  cr_assert_eq(ofi_peer_record_gone(&rec, why, sizeof why), 0, "a live peer named gone: %s", why);
  end_peer(child, hold);
  cr_assert_eq(ofi_peer_record_gone(&rec, why, sizeof why), 1, "an exited peer not named gone");
}
