/* Internal: waiting on one word of memory (Linux futex), for a hand-off
 * between two threads that costs one system call on each side at most.
 *
 * pthread_cond_wait costs a third: the woken waiter takes its mutex back in
 * glibc's "maybe contended" state, so its unlock makes a futex wake-up call
 * that wakes nobody. A handle's waiter (handle.c) waits on a word instead.
 * Process-private words only. Any thread. */
#ifndef PLAIT_UTIL_FUTEX_H
#define PLAIT_UTIL_FUTEX_H

#include <stdatomic.h>
#include <time.h>

/* Sleeps while *word == expected, for at most *rel (NULL: no limit): a
 * relative timeout, so a clock shifted in user space (libfaketime) cannot
 * stretch it. 0 when woken (or spuriously), else an errno: EAGAIN (*word
 * was not expected), EINTR, ETIMEDOUT. The caller checks its condition
 * again in every case. */
int plait_futex_wait(atomic_uint *word, unsigned expected, const struct timespec *rel);

/* Wakes every thread sleeping on word. */
void plait_futex_wake_all(atomic_uint *word);

#endif
