/*
 * A libfabric mutex that a rescue left held, released for the close.
 *
 * The rescue (rescue.h) jumps the guarded thread out of libfabric: a mutex
 * it held there stays held. libfabric's completion-queue progress holds the
 * queue's endpoint-list mutex while it runs each endpoint's progress, which
 * is where a spin on a dead peer's lock is caught; so the close of the
 * rescued endpoint at a later init (parked.h), whose fi_close(ep) takes that
 * very mutex to take the endpoint off the queue's list, blocked on it for
 * ever: seen under load in 2 of 6 runs of 101 kill-in-lock cycles
 * (reset_cycles_ofi-shm_in_lock: the closer thread, the endpoint's 3 shm
 * mappings and 1.8 MiB of heap kept).
 *
 * While the closer runs, the sweep looks at where it waits: a thread blocked
 * in futex(2) on a word that /proc/self/task/<tid>/syscall names. When that
 * word is a glibc mutex of the normal kind, locked, whose owner is the
 * rescued thread, and that thread has exited (the coordinator thread is
 * joined at shutdown, before the next init) or is the sweeping thread
 * itself (a rescue on plait_shutdown's thread: libfabric never returns to
 * its caller holding one of its mutexes), nobody can ever unlock it: the
 * sweep unlocks it for it, and the close goes on. A mutex owned by a live
 * thread, of another kind, or a wait that is not a futex (a spin), is never
 * touched: the close then stays blocked, as before, and the init goes on.
 */
#ifndef PLAIT_OFI_ORPHAN_LOCK_H
#define PLAIT_OFI_ORPHAN_LOCK_H

/* The kernel thread id of the calling thread. */
int ofi_gettid(void);

/* Where thread `tid` of this process is blocked in a futex wait, the word's
 * address; NULL when it is not (running, another system call, unreadable). */
void *ofi_futex_waited_on(int tid);

/* Whether thread `tid` of this process has exited. */
int ofi_thread_gone(int tid);

/* When thread `waiter` is blocked on a normal glibc mutex owned by
 * `dead_owner`, a thread of this process that has exited or the calling
 * thread itself (then out of libfabric, which never returns holding one of
 * its mutexes), unlocks it and returns 1; else touches nothing and returns 0. */
int ofi_release_orphan_lock(int waiter, int dead_owner);

#endif
