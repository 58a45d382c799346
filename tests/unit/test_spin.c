/*
 * util/spin: polling before sleeping (PLAIT_SPIN_US). What comes during the
 * window is seen without sleeping, nothing past the window is waited for,
 * 0 never polls, and a yield that another thread turns into a whole slice
 * stops polling for a while.
 */
#include <criterion/criterion.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <string.h>
#include <unistd.h>

#include "util/clock.h"
#include "util/spin.h"

typedef struct {
  int fd;
  double delay_s;
} writer_t;

static void *write_later(void *arg) {
  writer_t *w = arg;
  usleep((useconds_t)(w->delay_s * 1e6));
  cr_assert_eq(write(w->fd, "x", 1), 1);
  return NULL;
}

static void pipe_pfd(int p[2], struct pollfd *pfd) {
  cr_assert_eq(pipe(p), 0);
  *pfd = (struct pollfd){p[0], POLLIN, 0};
}

Test(spin, what_comes_within_the_window_is_seen_without_sleeping) {
  int p[2];
  struct pollfd pfd;
  pipe_pfd(p, &pfd);
  plait_spin_t s;
  plait_waitset_t ws;
  plait_waitset_init(&ws);
  plait_spin_init(&s, 1000000); /* a whole second: the write comes well before */
  writer_t w = {p[1], 0.002};
  pthread_t t;
  pthread_create(&t, NULL, write_later, &w);
  double t0 = plait_now();
  int ready = 0;
  /* a late yield (a loaded machine) ends the window early: then the caller
   * would sleep; try again, as the coordinator would on its next cycle */
  while (ready == 0 && plait_now() - t0 < 30) {
    s.off_until = 0;
    ready = plait_spin_poll(&s, &ws, &pfd, 1, plait_now() + s.spin_s);
  }
  pthread_join(t, NULL);
  cr_assert_eq(ready, 1, "the pipe became readable within the window");
  cr_assert(pfd.revents & POLLIN);
  plait_waitset_free(&ws);
  close(p[0]), close(p[1]);
}

Test(spin, nothing_is_waited_for_past_the_window) {
  int p[2];
  struct pollfd pfd;
  pipe_pfd(p, &pfd);
  plait_spin_t s;
  plait_waitset_t ws;
  plait_waitset_init(&ws);
  plait_spin_init(&s, 1000000);
  double until = plait_now() + 0.005;
  cr_assert_eq(plait_spin_poll(&s, &ws, &pfd, 1, until), 0);
  cr_assert_geq(plait_now(), s.off_until > 0 ? 0 : until, "it polled until the window ended "
                "(or stopped at a late yield)");
  /* a window already over: no poll at all, even with data there */
  cr_assert_eq(write(p[1], "x", 1), 1);
  cr_assert_eq(plait_spin_poll(&s, &ws, &pfd, 1, plait_now() - 1), 0);
  plait_waitset_free(&ws);
  close(p[0]), close(p[1]);
}

Test(spin, zero_never_polls) {
  int p[2];
  struct pollfd pfd;
  pipe_pfd(p, &pfd);
  cr_assert_eq(write(p[1], "x", 1), 1);
  plait_spin_t s;
  plait_waitset_t ws;
  plait_waitset_init(&ws);
  plait_spin_init(&s, 0);
  cr_assert_eq(s.spin_s, 0);
  cr_assert_eq(plait_spin_poll(&s, &ws, &pfd, 1, plait_now() + 1), 0,
               "PLAIT_SPIN_US=0: the caller sleeps in poll as before");
  cr_assert_eq(pfd.revents, 0);
  plait_waitset_free(&ws);
  close(p[0]), close(p[1]);
}

static atomic_int stop_hog;

static void *hog(void *arg) {
  cpu_set_t *cpu = arg;
  pthread_setaffinity_np(pthread_self(), sizeof *cpu, cpu);
  while (!atomic_load(&stop_hog)) {
  }
  return NULL;
}

Test(spin, a_yield_another_thread_turns_into_a_slice_stops_polling) {
  cpu_set_t cpu;
  CPU_ZERO(&cpu);
  CPU_SET(sched_getcpu(), &cpu);
  cr_assert_eq(pthread_setaffinity_np(pthread_self(), sizeof cpu, &cpu), 0);
  atomic_store(&stop_hog, 0);
  pthread_t t;
  pthread_create(&t, NULL, hog, &cpu); /* a CPU-bound thread on this CPU */
  int p[2];
  struct pollfd pfd;
  pipe_pfd(p, &pfd);
  plait_spin_t s;
  plait_waitset_t ws;
  plait_waitset_init(&ws);
  plait_spin_init(&s, 1000000);
  double t0 = plait_now();
  while (s.held == 0 && plait_now() - t0 < 30)
    cr_assert_eq(plait_spin_poll(&s, &ws, &pfd, 1, plait_now() + 0.5), 0);
  atomic_store(&stop_hog, 1);
  pthread_join(t, NULL);
  cr_assert_eq(s.held, 1, "the hog held the CPU through a yield");
  cr_assert_gt(s.off_until, plait_now() + 0.5, "polling is off for about a second");
  cr_assert_eq(write(p[1], "x", 1), 1);
  cr_assert_eq(plait_spin_poll(&s, &ws, &pfd, 1, plait_now() + 1), 0,
               "while off, nothing is polled: the caller sleeps");
  s.off_until = 0;
  cr_assert_eq(plait_spin_poll(&s, &ws, &pfd, 1, plait_now() + 1), 1, "on again afterwards");
  plait_waitset_free(&ws);
  close(p[0]), close(p[1]);
}
