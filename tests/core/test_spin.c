/*
 * util/spin: polling before sleeping (PLAIT_SPIN_US). What comes during the
 * window is seen without sleeping, nothing past the window is waited for,
 * 0 never polls, and a yield that another thread turns into a whole slice
 * stops polling for a while: 10 ms at first, doubling up to a second while
 * late yields keep coming, 10 ms again after a calm spell.
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

/* A pipe to poll, a spin state and a wait set. */
typedef struct {
  int p[2];
  struct pollfd pfd;
  plait_spin_t s;
  plait_waitset_t ws;
} fx_t;

static void fx_open(fx_t *f, int64_t spin_us) {
  cr_assert_eq(pipe(f->p), 0);
  f->pfd = (struct pollfd){f->p[0], POLLIN, 0};
  plait_spin_init(&f->s, spin_us);
  plait_waitset_init(&f->ws);
}

static void fx_close(fx_t *f) {
  plait_waitset_free(&f->ws);
  close(f->p[0]);
  close(f->p[1]);
}

static int spin(fx_t *f, double until) { return plait_spin_poll(&f->s, &f->ws, &f->pfd, 1, until); }

Test(spin, what_comes_within_the_window_is_seen_without_sleeping) {
  fx_t f;
  fx_open(&f, 1000000); /* a whole second: the write comes well before */
  writer_t w = {f.p[1], 0.002};
  pthread_t t;
  pthread_create(&t, NULL, write_later, &w);
  double t0 = plait_now();
  int ready = 0;
  /* a late yield (a loaded machine) ends the window early: then the caller
   * would sleep; try again, as the coordinator would on its next cycle */
  while (ready == 0 && plait_now() - t0 < 30) {
    f.s.off_until = 0;
    ready = spin(&f, plait_now() + f.s.spin_s);
  }
  pthread_join(t, NULL);
  cr_assert_eq(ready, 1, "the pipe became readable within the window");
  cr_assert(f.pfd.revents & POLLIN);
  fx_close(&f);
}

Test(spin, nothing_is_waited_for_past_the_window) {
  fx_t f;
  fx_open(&f, 1000000);
  double until = plait_now() + 0.005;
  cr_assert_eq(spin(&f, until), 0);
  cr_assert_geq(plait_now(), f.s.off_until > 0 ? 0 : until, "it polled until the window ended "
                "(or stopped at a late yield)");
  /* a window already over: no poll at all, even with data there */
  cr_assert_eq(write(f.p[1], "x", 1), 1);
  cr_assert_eq(spin(&f, plait_now() - 1), 0);
  fx_close(&f);
}

Test(spin, zero_never_polls) {
  fx_t f;
  fx_open(&f, 0);
  cr_assert_eq(write(f.p[1], "x", 1), 1);
  cr_assert_eq(f.s.spin_s, 0);
  cr_assert_eq(spin(&f, plait_now() + 1), 0, "PLAIT_SPIN_US=0: the caller sleeps in poll as before");
  cr_assert_eq(f.pfd.revents, 0);
  fx_close(&f);
}

static atomic_int stop_hog;

static void *hog(void *arg) {
  cpu_set_t *cpu = arg;
  pthread_setaffinity_np(pthread_self(), sizeof *cpu, cpu);
  while (!atomic_load(&stop_hog)) {
  }
  return NULL;
}

/* Pins this thread to its CPU and starts a CPU-bound thread there. */
static pthread_t start_hog(void) {
  static cpu_set_t cpu; /* read by the hog as it starts */
  CPU_ZERO(&cpu);
  CPU_SET(sched_getcpu(), &cpu);
  cr_assert_eq(pthread_setaffinity_np(pthread_self(), sizeof cpu, &cpu), 0);
  atomic_store(&stop_hog, 0);
  pthread_t t;
  pthread_create(&t, NULL, hog, &cpu);
  return t;
}

Test(spin, a_yield_another_thread_turns_into_a_slice_stops_polling) {
  pthread_t t = start_hog();
  fx_t f;
  fx_open(&f, 1000000);
  double t0 = plait_now();
  while (f.s.held == 0 && plait_now() - t0 < 30) cr_assert_eq(spin(&f, plait_now() + 0.5), 0);
  atomic_store(&stop_hog, 1);
  pthread_join(t, NULL);
  cr_assert_eq(f.s.held, 1, "the hog held the CPU through a yield");
  cr_assert_float_eq(f.s.off_s, 0.01, 1e-12, "a first late yield pauses polling for 10 ms");
  double late_at = f.s.off_until - f.s.off_s;
  cr_assert(late_at >= t0 && late_at <= plait_now(), "the pause starts at the late yield");
  cr_assert_eq(write(f.p[1], "x", 1), 1);
  /* however long joining the hog took on a loaded machine, look at a pause
   * still running: while off, nothing is polled */
  plait_spin_late(&f.s, plait_now());
  cr_assert_eq(spin(&f, plait_now() + 1), 0, "while off, nothing is polled: the caller sleeps");
  f.s.off_until = 0;
  cr_assert_eq(spin(&f, plait_now() + 1), 1, "on again afterwards");
  fx_close(&f);
}

Test(spin, late_yields_that_keep_coming_double_the_pause_up_to_a_second) {
  plait_spin_t s;
  plait_spin_init(&s, 100);
  double now = 1000.0, expect = 0.01;
  plait_spin_late(&s, now);
  cr_assert_float_eq(s.off_s, 0.01, 1e-12);
  cr_assert_float_eq(s.off_until, now + 0.01, 1e-12);
  /* each late yield soon after the pause ended (within 4 times its length) */
  for (int i = 0; i < 12; i++) {
    now = s.off_until + 3.9 * s.off_s;
    plait_spin_late(&s, now);
    expect = expect * 2 > 1.0 ? 1.0 : expect * 2;
    cr_assert_float_eq(s.off_s, expect, 1e-12, "late yield %d", i + 2);
    cr_assert_float_eq(s.off_until, now + expect, 1e-12);
  }
  cr_assert_float_eq(s.off_s, 1.0, 1e-12, "a CPU-bound neighbour: one try a second");
  cr_assert_eq(s.held, 13);
  /* a calm spell (more than 4 times the pause without a late yield) */
  now = s.off_until + 4.1;
  plait_spin_late(&s, now);
  cr_assert_float_eq(s.off_s, 0.01, 1e-12, "after a calm spell, 10 ms again");
  now = s.off_until + 0.041;
  plait_spin_late(&s, now);
  cr_assert_float_eq(s.off_s, 0.01, 1e-12, "calm is measured against the last pause");
}

/* Right after a long collective (2 ms or more), for as long again (at most
 * 0.1 s), a late yield ends the poll but starts no pause: another rank was
 * finishing its part on this CPU. Short collectives excuse nothing. */
Test(spin, late_yields_right_after_a_long_collective_start_no_pause) {
  plait_spin_t s;
  plait_spin_init(&s, 100);
  plait_spin_ran(&s, 0.001, 1000.0);
  cr_assert_eq(s.excused_until, 0, "a 1 ms collective excuses nothing");
  plait_spin_ran(&s, 0.025, 1000.0);
  cr_assert_float_eq(s.excused_until, 1000.025, 1e-9, "25 ms: excused for 25 ms");
  plait_spin_ran(&s, 5.0, 1000.0);
  cr_assert_float_eq(s.excused_until, 1000.1, 1e-9, "at most 0.1 s");
  plait_spin_ran(&s, 0.003, 1000.0);
  cr_assert_float_eq(s.excused_until, 1000.1, 1e-9, "a shorter one never shortens it");

  /* with a CPU-bound thread on this CPU: excused while the window lasts,
   * a pause once it is over */
  pthread_t t = start_hog();
  fx_t f;
  fx_open(&f, 1000000);
  double t0 = plait_now();
  plait_spin_ran(&f.s, 0.1, t0 + 3600); /* excused for the test's whole length */
  f.s.excused_until = t0 + 3600;
  while (f.s.excused == 0 && plait_now() - t0 < 30) cr_assert_eq(spin(&f, plait_now() + 0.5), 0);
  cr_assert_eq(f.s.excused, 1, "the hog held the CPU through a yield");
  cr_assert_eq(f.s.held, 0, "excused: no pause");
  cr_assert_eq(f.s.off_until, 0);
  f.s.excused_until = 0; /* the window is over */
  t0 = plait_now();
  while (f.s.held == 0 && plait_now() - t0 < 30) cr_assert_eq(spin(&f, plait_now() + 0.5), 0);
  atomic_store(&stop_hog, 1);
  pthread_join(t, NULL);
  cr_assert_eq(f.s.held, 1, "afterwards a late yield pauses polling");
  fx_close(&f);
}
