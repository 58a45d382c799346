#include "hosts.h"

#include "../hostnames.h"

#include <stdio.h>
#include <string.h>

void plaitrun_hosts_init(plaitrun_hosts_t *h, int cooldown_min_s, int cooldown_max_s) {
  memset(h, 0, sizeof *h);
  h->cooldown_min_s = cooldown_min_s;
  h->cooldown_max_s = cooldown_max_s;
}

int plaitrun_hosts_find(const plaitrun_hosts_t *h, const char *name) {
  for (int i = 0; i < h->n; i++)
    if (!strcmp(h->hosts[i].name, name)) return i;
  return -1;
}

static void note(plaitrun_hosts_t *h, int host, plaitrun_host_change_kind_t kind, int old) {
  if (h->n_changes < PLAITRUN_HOSTS_TABLE_MAX)
    h->changes[h->n_changes++] = (plaitrun_host_change_t){host, kind, old};
}

/* A slot of the table for a host never seen: a free one, or one of a host
 * that left the list and is not blacklisted. -1 when none. */
static int new_entry(plaitrun_hosts_t *h, const char *name, const int *listed) {
  int i = h->n;
  if (i >= PLAITRUN_HOSTS_TABLE_MAX) {
    for (i = 0; i < h->n; i++)
      if (!listed[i] && !h->hosts[i].slots && !h->hosts[i].blacklisted) break;
    if (i == h->n) return -1;
  } else {
    h->n++;
  }
  memset(&h->hosts[i], 0, sizeof h->hosts[i]);
  snprintf(h->hosts[i].name, sizeof h->hosts[i].name, "%.*s", PLAITRUN_HOST_NAME_MAX - 1, name);
  h->hosts[i].local = plaitrun_is_this_host(name);
  return i;
}

/* Takes one listed host; returns its change bits, or -1 when the table is full. */
static int take_listed(plaitrun_hosts_t *h, const plaitrun_found_host_t *f, int *listed) {
  int i = plaitrun_hosts_find(h, f->name);
  if (i < 0 && (i = new_entry(h, f->name, listed)) < 0) return -1;
  listed[i] = 1;
  plaitrun_host_state_t *s = &h->hosts[i];
  int old = s->slots;
  s->slots = f->slots;
  if (old == 0) {
    s->order = ++h->next_order;
    note(h, i, PLAITRUN_HOST_NEW, 0);
    return PLAITRUN_HOSTS_ADDED;
  }
  if (old == f->slots) return 0;
  note(h, i, PLAITRUN_HOST_SLOTS, old);
  return f->slots > old ? PLAITRUN_HOSTS_ADDED : PLAITRUN_HOSTS_REMOVED;
}

int plaitrun_hosts_update(plaitrun_hosts_t *h, const plaitrun_hostlist_t *found, double now) {
  int listed[PLAITRUN_HOSTS_TABLE_MAX] = {0};
  int bits = 0, full = 0;
  h->n_changes = 0;
  for (int k = 0; k < found->n; k++) {
    int b = take_listed(h, &found->hosts[k], listed);
    if (b < 0)
      full = 1;
    else
      bits |= b;
  }
  for (int i = 0; i < h->n; i++) {
    plaitrun_host_state_t *s = &h->hosts[i];
    if (!listed[i] && s->slots > 0) {
      note(h, i, PLAITRUN_HOST_GONE, s->slots);
      s->slots = 0;
      bits |= PLAITRUN_HOSTS_REMOVED;
    }
    if (s->blacklisted && s->cooldown_end > 0 && now >= s->cooldown_end) {
      s->blacklisted = 0;
      s->cooldown_end = 0;
      if (s->slots > 0) {
        note(h, i, PLAITRUN_HOST_BACK, s->slots);
        bits |= PLAITRUN_HOSTS_ADDED;
      }
    }
  }
  return full ? -1 : bits;
}

double plaitrun_cooldown_s(int min_s, int max_s, int count, double u) {
  double d = (double)min_s * (double)(1UL << (count > 30 ? 30 : count)) + u * (double)min_s;
  if (d > max_s) d = max_s;
  if (d < min_s) d = min_s;
  return d;
}

double plaitrun_hosts_blacklist(plaitrun_hosts_t *h, int host, double now, double u) {
  plaitrun_host_state_t *s = &h->hosts[host];
  s->blacklisted = 1;
  if (h->cooldown_min_s <= 0) {
    s->cooldown_end = 0;
    return -1;
  }
  if (s->cooldown_end > now) return s->cooldown_end - now; /* still cooling down */
  s->blacklist_count++;
  double d = plaitrun_cooldown_s(h->cooldown_min_s, h->cooldown_max_s, s->blacklist_count, u);
  s->cooldown_end = now + d;
  return d;
}

int plaitrun_hosts_usable(const plaitrun_hosts_t *h, int host) {
  return h->hosts[host].slots > 0 && !h->hosts[host].blacklisted;
}

int plaitrun_hosts_ordered(const plaitrun_hosts_t *h, int with_blacklisted, int *out, int cap) {
  int n = 0;
  for (int i = 0; i < h->n; i++) {
    if (h->hosts[i].slots <= 0 || (!with_blacklisted && h->hosts[i].blacklisted)) continue;
    if (n >= cap) break; /* cap: the table's size in the driver */
    int k = n++; /* insertion by order */
    while (k > 0 && h->hosts[out[k - 1]].order > h->hosts[i].order) {
      out[k] = out[k - 1];
      k--;
    }
    out[k] = i;
  }
  return n;
}

int plaitrun_hosts_usable_slots(const plaitrun_hosts_t *h) {
  int total = 0;
  for (int i = 0; i < h->n; i++)
    if (plaitrun_hosts_usable(h, i)) total += h->hosts[i].slots;
  return total;
}
