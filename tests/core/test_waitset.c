/*
 * util/waitset: poll() semantics over an epoll set (rank 0's wait on one
 * control socket per rank). Readiness, hang-up, timeout, a changed list,
 * and short lists that go to poll() itself.
 */
#include <criterion/criterion.h>
#include <poll.h>
#include <unistd.h>

#include "util/waitset.h"

#define N 40

typedef struct {
  int r[N], w[N];
  struct pollfd pfd[N];
} pipes_t;

static void pipes_open(pipes_t *p, int n) {
  for (int i = 0; i < n; i++) {
    int fd[2];
    cr_assert_eq(pipe(fd), 0);
    p->r[i] = fd[0], p->w[i] = fd[1];
    p->pfd[i] = (struct pollfd){fd[0], POLLIN, 0};
  }
}

static void pipes_close(pipes_t *p, int n) {
  for (int i = 0; i < n; i++) {
    close(p->r[i]);
    if (p->w[i] >= 0) close(p->w[i]);
  }
}

static void expect_ready(const pipes_t *p, int n, const int *want, int nwant, short bits) {
  for (int i = 0; i < n; i++) {
    int w = 0;
    for (int k = 0; k < nwant; k++) w |= want[k] == i;
    if (w) cr_expect(p->pfd[i].revents & bits, "entry %d: revents 0x%x, wanted 0x%x", i,
                     p->pfd[i].revents, bits);
    else cr_expect_eq(p->pfd[i].revents, 0, "entry %d: revents 0x%x, not ready", i,
                      p->pfd[i].revents);
  }
}

Test(waitset, reports_exactly_the_ready_descriptors) {
  pipes_t p;
  pipes_open(&p, N);
  plait_waitset_t ws;
  plait_waitset_init(&ws);
  cr_expect_eq(plait_waitset_poll(&ws, p.pfd, N, 0), 0, "nothing is ready yet");
  expect_ready(&p, N, NULL, 0, 0);
  cr_assert_eq(write(p.w[3], "x", 1), 1);
  cr_assert_eq(write(p.w[37], "y", 1), 1);
  cr_expect_eq(plait_waitset_poll(&ws, p.pfd, N, 1000), 2);
  int want[] = {3, 37};
  expect_ready(&p, N, want, 2, POLLIN);
  cr_expect_geq(ws.epfd, 0, "a list of %d uses epoll", N);
  /* level-triggered, as poll: still ready until read */
  cr_expect_eq(plait_waitset_poll(&ws, p.pfd, N, 0), 2);
  char c;
  cr_assert_eq(read(p.r[3], &c, 1), 1);
  cr_expect_eq(plait_waitset_poll(&ws, p.pfd, N, 0), 1);
  expect_ready(&p, N, want + 1, 1, POLLIN);
  plait_waitset_free(&ws);
  pipes_close(&p, N);
}

Test(waitset, a_closed_peer_is_a_hang_up) {
  pipes_t p;
  pipes_open(&p, N);
  plait_waitset_t ws;
  plait_waitset_init(&ws);
  close(p.w[20]);
  p.w[20] = -1;
  cr_expect_eq(plait_waitset_poll(&ws, p.pfd, N, 1000), 1);
  int want[] = {20};
  expect_ready(&p, N, want, 1, POLLHUP);
  plait_waitset_free(&ws);
  pipes_close(&p, N);
}

Test(waitset, a_changed_list_is_followed) {
  pipes_t p, q;
  pipes_open(&p, N);
  pipes_open(&q, 1);
  plait_waitset_t ws;
  plait_waitset_init(&ws);
  cr_expect_eq(plait_waitset_poll(&ws, p.pfd, N, 0), 0);
  /* entry 5 now watches another pipe, which has data */
  p.pfd[5].fd = q.r[0];
  cr_assert_eq(write(q.w[0], "z", 1), 1);
  cr_expect_eq(plait_waitset_poll(&ws, p.pfd, N, 1000), 1);
  int want[] = {5};
  expect_ready(&p, N, want, 1, POLLIN);
  /* a shorter list (rank 0's blame round waits on fewer) */
  cr_assert_eq(write(p.w[1], "w", 1), 1);
  cr_expect_eq(plait_waitset_poll(&ws, p.pfd, N - 3, 1000), 2);
  p.pfd[5].fd = p.r[5];
  plait_waitset_free(&ws);
  pipes_close(&p, N);
  pipes_close(&q, 1);
}

Test(waitset, short_lists_use_poll_and_time_out) {
  pipes_t p;
  pipes_open(&p, 2);
  plait_waitset_t ws;
  plait_waitset_init(&ws);
  cr_expect_eq(plait_waitset_poll(&ws, p.pfd, 2, 10), 0);
  cr_expect_eq(ws.epfd, -1, "a list of 2 goes to poll()");
  cr_assert_eq(write(p.w[1], "x", 1), 1);
  cr_expect_eq(plait_waitset_poll(&ws, p.pfd, 2, 1000), 1);
  cr_expect_eq(p.pfd[1].revents, POLLIN);
  plait_waitset_free(&ws);
  plait_waitset_free(&ws); /* twice is harmless */
  pipes_close(&p, 2);
}
