/*
 * A hostile neighbour for multi-rank tests: a forked process that watches the
 * job's processes for new listening TCP sockets and connects to each one as
 * soon as it appears, the way a local attacker would race a transport's
 * connection setup.
 *
 * It finds the sockets the ranks own through /proc/<pid>/fd ("socket:[inode]")
 * and the listening ones (state 0A) through /proc/net/tcp and /proc/net/tcp6,
 * polling every 100 us. Each listener gets one connection, which is kept open
 * until the intruder stops; with junk set it also sends 256 random bytes at
 * once. Rank pids are read from a shared array the ranks fill in (0 = not
 * known yet), so the intruder can start before the ranks do.
 */
#ifndef PLAIT_TEST_INTRUDER_H
#define PLAIT_TEST_INTRUDER_H

#include <stdatomic.h>
#include <sys/types.h>

/* Forks the intruder; pids[0..npids) are read while it runs. -1 on failure. */
pid_t plait_test_intruder_start(const atomic_int *pids, int npids, int junk);

/* Stops it (SIGTERM, then waits); returns the number of listeners it
 * connected to, or -1 when it could not be stopped cleanly. */
int plait_test_intruder_stop(pid_t intruder);

#endif
