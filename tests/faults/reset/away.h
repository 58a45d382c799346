/*
 * Peers of a reset test on another host (tests/faults/reset, --away): each
 * peer process runs in a network namespace the caller made (a host of
 * tests/tools/hosts/lib.sh, named as `ip netns` names it) and in a pid
 * namespace of its own, so the survivor can neither check its pid nor reach
 * it but over the network: what a peer on another machine is to it.
 *
 * The forked child calls away_enter(netns); it returns 0 in a grandchild
 * that is pid 2 of a new pid namespace (pid 1 there ignores the signals it
 * sends itself, and the victim SIGSTOPs or SIGKILLs itself). The processes
 * between wait for it and end as it ends: exit status, or death by the same
 * signal. SIGKILL of the forked child (what the survivor sends a stopped
 * victim) kills the whole namespace: its pid 1 dies with its parent
 * (PR_SET_PDEATHSIG), and the kernel then kills the rest.
 * Returns -1 (with errno) when a namespace cannot be entered or made.
 */
#ifndef PLAIT_TEST_RESET_AWAY_H
#define PLAIT_TEST_RESET_AWAY_H

int away_enter(const char *netns);

#endif
