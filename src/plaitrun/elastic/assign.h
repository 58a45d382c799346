/*
 * plaitrun's elastic driver: ranks for the workers of a new epoch. Pure.
 *
 * Each candidate is a worker that asked for a place (JOIN), on a seat: its
 * host's place in the host order (hosts.h: oldest first) and its slot on that
 * host. Ranks are given host by host, slot by slot; size = min(max_np,
 * candidates); candidates past max_np get rank -1 (the driver answers them
 * STOP). local_rank / local_size: the worker's index among its host's
 * chosen workers, and how many there are. cross_rank: the index of its host
 * among the job's hosts that hold a worker with the same local_rank;
 * cross_size: how many such hosts (Horovod's definition).
 */
#ifndef PLAITRUN_ELASTIC_ASSIGN_H
#define PLAITRUN_ELASTIC_ASSIGN_H

typedef struct {
  int host_order; /* the host's place in the order; lower: older */
  int slot;       /* the worker's slot on that host */
} plaitrun_seat_t;

typedef struct {
  int rank, size, local_rank, local_size, cross_rank, cross_size; /* rank -1: no place */
} plaitrun_place_t;

/*
 * Fills place[i] for seats[i], i < n (n <= PLAITRUN_MAX_RANKS * 4; seats are
 * distinct). max_np: the largest size (0: no cap). Returns the size; -1 when
 * out of memory.
 */
int plaitrun_assign(const plaitrun_seat_t *seats, int n, int max_np, plaitrun_place_t *place);

#endif
