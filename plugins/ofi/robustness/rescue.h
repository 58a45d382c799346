/*
 * Getting a thread out of a libfabric call that can never return.
 *
 * libfabric's shm provider (1.17) guards each rank's shared-memory region
 * with a spin lock that the other ranks take too (a sender takes the
 * receiver's). A rank killed while it holds one leaves it held for ever, and
 * the next rank to take it spins inside fi_cq_read() or fi_tsend() without
 * end: no deadline in the plugin's own loops can help (issue 16, defect 4:
 * reproduced by killing a rank right after it took such a lock, in
 * tests/plugins/ofi/test_ofi_lock_holder.c).
 *
 * Every collective runs guarded (OFI_RESCUABLE, from plugin.c's entry
 * layer OFI_GUARDED). A watchdog thread per state looks every 50 ms at the
 * guarded thread: when it has used more than OFI_RESCUE_CPU_S of CPU time
 * in user space since the plugin's progress loop last turned, it is spinning
 * inside libfabric. It is got out at once when a peer on this host has
 * exited (the lock stays held for ever), else only after PLAIT_TIMEOUT_S of
 * spinning: a peer stopped holding the lock (SIGSTOP, a debugger) lets go
 * when it runs again, and a pause shorter than the timeout is no loss
 * (issue 38, defect 5: rescued after 0.5 s before, failing the job;
 * tests/plugins/ofi/test_ofi_lock_holder.c). Time in the kernel does
 * not count (a lock is spun on in user space; page faults that compact
 * memory for huge pages, and CMA copies, can take long on a loaded machine
 * and are not stuck); where /proc cannot tell user time, all of it counts. The watchdog then sends it OFI_RESCUE_SIGNAL,
 * whose handler jumps back to the collective's entry (siglongjmp), which
 * fails with PLAIT_ERR_PEER_LOST naming the local peers that are gone or
 * stopped. libfabric is never called again on that state (its locks may be
 * held): it is abandoned, and at finalize its objects are parked, to be
 * closed at a later init on a thread of its own, bounded (parked.h).
 *
 * The handler is installed at the first rescue only, and a signal that is
 * not a rescue goes to the handler that was there before.
 */
#ifndef PLAIT_OFI_RESCUE_H
#define PLAIT_OFI_RESCUE_H

#include <setjmp.h>
#include <signal.h>
#include <stdatomic.h>

#include "state.h"

#define OFI_RESCUE_SIGNAL (SIGRTMIN + 5)
#define OFI_RESCUE_CPU_S 0.5

/* Starts / stops the watchdog (nranks > 1). */
plait_result_t ofi_rescue_start(ofi_state_t *st);
void ofi_rescue_stop(ofi_state_t *st);

void ofi_guard_on(ofi_state_t *st, sigjmp_buf *escape);
void ofi_guard_off(ofi_state_t *st);
/* After the jump: abandons the state and returns the failure. */
plait_result_t ofi_rescued(ofi_state_t *st);

/* The progress loop turned (progress.c). */
static inline void ofi_turn(ofi_state_t *st) {
  atomic_fetch_add_explicit(&st->turns, 1, memory_order_relaxed);
}

/* Runs `call` guarded and stores its result in rc (the rescue's failure
 * when the watchdog got the thread out), from a plugin entry point:
 * plugin.c's guarded entry layer, which then tears down a state that broke. */
#define OFI_RESCUABLE(st, rc, call)                        \
  do {                                                     \
    sigjmp_buf escape_;                                    \
    if (sigsetjmp(escape_, 0)) {                           \
      (rc) = ofi_rescued(st);                              \
    } else {                                               \
      ofi_guard_on((st), &escape_);                        \
      (rc) = (call);                                       \
      ofi_guard_off(st);                                   \
    }                                                      \
  } while (0)

#endif
