#include "assign.h"

#include <stdlib.h>

static int seat_before(const plaitrun_seat_t *a, const plaitrun_seat_t *b) {
  if (a->host_order != b->host_order) return a->host_order < b->host_order;
  return a->slot < b->slot;
}

/* Indexes of seats in rank order (insertion sort: n is small). */
static void sort_seats(const plaitrun_seat_t *seats, int n, int *idx) {
  for (int i = 0; i < n; i++) {
    int k = i;
    while (k > 0 && seat_before(&seats[i], &seats[idx[k - 1]])) {
      idx[k] = idx[k - 1];
      k--;
    }
    idx[k] = i;
  }
}

/* local_rank / local_size for the chosen seats (idx[0..size), in rank order). */
static void set_local(const plaitrun_seat_t *seats, const int *idx, int size,
                      plaitrun_place_t *place) {
  int first = 0;
  while (first < size) {
    int end = first;
    while (end < size && seats[idx[end]].host_order == seats[idx[first]].host_order) end++;
    for (int k = first; k < end; k++) {
      place[idx[k]].local_rank = k - first;
      place[idx[k]].local_size = end - first;
    }
    first = end;
  }
}

/* cross_rank / cross_size: hosts come in rank order, so counting the chosen
 * seats of earlier hosts with the same local_rank gives the cross rank. */
static void set_cross(const int *idx, int size, plaitrun_place_t *place) {
  for (int k = 0; k < size; k++) {
    plaitrun_place_t *p = &place[idx[k]];
    int before = 0, total = 0;
    for (int j = 0; j < size; j++) {
      if (place[idx[j]].local_rank != p->local_rank) continue;
      total++;
      if (j < k) before++;
    }
    p->cross_rank = before;
    p->cross_size = total;
  }
}

int plaitrun_assign(const plaitrun_seat_t *seats, int n, int max_np, plaitrun_place_t *place) {
  if (n <= 0) return 0;
  int *idx = malloc((size_t)n * sizeof *idx);
  if (!idx) return -1;
  sort_seats(seats, n, idx);
  int size = max_np > 0 && n > max_np ? max_np : n;
  for (int i = 0; i < n; i++) place[i] = (plaitrun_place_t){-1, 0, -1, 0, -1, 0};
  for (int k = 0; k < size; k++) {
    place[idx[k]].rank = k;
    place[idx[k]].size = size;
  }
  set_local(seats, idx, size, place);
  set_cross(idx, size, place);
  free(idx);
  return size;
}
