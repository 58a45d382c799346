/*
 * plaitrun's elastic driver: the hosts it knows, their order, and the
 * blacklist. Pure functions of their arguments (time is passed in).
 *
 * Order: a host gets its place when it is first discovered (or comes back
 * after it left the list); hosts keep their places, so the oldest hosts keep
 * the lowest ranks (assign.h). A host stays in the table after it leaves the
 * list, so its blacklisting is remembered.
 *
 * Blacklist: a host where a worker failed. No new worker is started on it;
 * the workers it still runs keep their places (killing one worker does not
 * take its neighbours out). Without a cooldown range a host stays
 * blacklisted for good; with --blacklist-cooldown-range MIN MAX it comes
 * back after Horovod's exponential back-off: after its n-th blacklisting
 * (n = 1, 2, ...), clamp(MIN * 2^n + u * MIN, MIN, MAX) seconds, u uniform in
 * [0, 1). A failure while the host is still cooling down starts no new period.
 */
#ifndef PLAITRUN_ELASTIC_HOSTS_H
#define PLAITRUN_ELASTIC_HOSTS_H

#include "discovery.h"

#define PLAITRUN_HOSTS_TABLE_MAX (4 * PLAITRUN_MAX_HOSTS)

/* Bits of plaitrun_hosts_update's result: elastic.h's PLAIT_HOSTS_ADDED and
 * PLAIT_HOSTS_REMOVED (Horovod's HostUpdateResult). */
#define PLAITRUN_HOSTS_ADDED 1u
#define PLAITRUN_HOSTS_REMOVED 2u

typedef enum {
  PLAITRUN_HOST_NEW,       /* listed for the first time, or again after leaving */
  PLAITRUN_HOST_GONE,      /* no longer listed */
  PLAITRUN_HOST_SLOTS,     /* listed with another slot count */
  PLAITRUN_HOST_BACK       /* its cooldown is over */
} plaitrun_host_change_kind_t;

typedef struct {
  int host; /* index in the table */
  plaitrun_host_change_kind_t kind;
  int old_slots;
} plaitrun_host_change_t;

typedef struct {
  char name[PLAITRUN_HOST_NAME_MAX];
  int slots;             /* in the last good list; 0: not listed */
  int local;             /* this host: workers by fork/exec, else over ssh */
  unsigned long order;   /* lower: discovered earlier */
  int blacklisted;
  int blacklist_count;
  double cooldown_end;   /* blacklisted with a range: until then; 0: for good */
} plaitrun_host_state_t;

typedef struct {
  plaitrun_host_state_t hosts[PLAITRUN_HOSTS_TABLE_MAX];
  int n;
  unsigned long next_order;
  int cooldown_min_s, cooldown_max_s; /* 0 0: no range */
  plaitrun_host_change_t changes[PLAITRUN_HOSTS_TABLE_MAX]; /* of the last update */
  int n_changes;
} plaitrun_hosts_t;

void plaitrun_hosts_init(plaitrun_hosts_t *h, int cooldown_min_s, int cooldown_max_s);

/* Index of name in the table, or -1. */
int plaitrun_hosts_find(const plaitrun_hosts_t *h, const char *name);

/*
 * Takes a good discovery result at time now: new hosts get the next places,
 * hosts whose cooldown is over leave the blacklist. Records what changed in
 * h->changes and returns PLAITRUN_HOSTS_* bits as Horovod's check_update: a
 * host gone or with fewer slots: REMOVED; a new host, more slots, or one back
 * from the blacklist: ADDED. -1 when the table is full (hosts never seen
 * before are then not taken).
 */
int plaitrun_hosts_update(plaitrun_hosts_t *h, const plaitrun_hostlist_t *found, double now);

/* A worker of host failed at time now; u in [0, 1) is the random part of the
 * back-off. Returns the seconds the host stays out from now, or -1 for good. */
double plaitrun_hosts_blacklist(plaitrun_hosts_t *h, int host, double now, double u);

/* Horovod's back-off: clamp(min * 2^count + u * min, min, max). */
double plaitrun_cooldown_s(int min_s, int max_s, int count, double u);

/* 1 when new workers may start on host: listed and not blacklisted. */
int plaitrun_hosts_usable(const plaitrun_hosts_t *h, int host);

/* The listed hosts (blacklisted ones too when with_blacklisted) by order,
 * oldest first; returns how many (at most cap). */
int plaitrun_hosts_ordered(const plaitrun_hosts_t *h, int with_blacklisted, int *out, int cap);

/* Slots of the usable hosts together. */
int plaitrun_hosts_usable_slots(const plaitrun_hosts_t *h);

#endif
