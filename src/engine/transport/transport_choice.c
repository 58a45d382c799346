/* PLAIT_TRANSPORT=auto: probe, exchange, choose alike on every rank. */
#include "engine/transport/transport_choice.h"

#include <dirent.h>
#include <endian.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/error.h"
#include "util/log.h"

#define FACT_WIRE (4 + PLAIT_CHOICE_DETAIL)

/* Orders offers: lower place first, then by name. */
static int offer_cmp(const void *a, const void *b) {
  const plait_choice_offer_t *x = a, *y = b;
  if (x->place != y->place) return x->place < y->place ? -1 : 1;
  return strcmp(x->name, y->name);
}

int plait_choice_candidates(const plait_choice_offer_t *offers, int nranks,
                            plait_choice_offer_t *out, int cap) {
  size_t all = (size_t)nranks * PLAIT_CHOICE_MAX, n = 0;
  plait_choice_offer_t *u = calloc(all ? all : 1, sizeof *u); /* the union, then the first cap */
  if (!u) return 0;
  for (size_t i = 0; i < all; i++) {
    const plait_choice_offer_t *o = &offers[i];
    if (!o->name[0]) continue; /* the end of a rank's list */
    size_t k = 0;
    while (k < n && strcmp(u[k].name, o->name)) k++;
    if (k == n) u[n++] = *o;
    else if (o->place < u[k].place) u[k].place = o->place; /* different builds: the first place */
  }
  qsort(u, n, sizeof *u, offer_cmp);
  int m = (int)n < cap ? (int)n : cap;
  memcpy(out, u, (size_t)m * sizeof *u);
  free(u);
  return m;
}

/* The names of the plugin files in dirs ("libplait-transport-<name>.so"),
 * each once, in the order the loader would find them. */
static int plugin_names(const char *search_path, char names[][PLAIT_CHOICE_NAME], int cap) {
  char dirs[8192];
  plait_plugin_dirs(search_path, dirs, sizeof dirs);
  static const char pre[] = "libplait-transport-", suf[] = ".so";
  int n = 0;
  char *save = NULL;
  for (char *dir = strtok_r(dirs, ":", &save); dir && n < cap; dir = strtok_r(NULL, ":", &save)) {
    DIR *d = opendir(dir);
    for (struct dirent *de; d && (de = readdir(d)) != NULL && n < cap;) {
      size_t len = strlen(de->d_name);
      if (strncmp(de->d_name, pre, sizeof pre - 1) || len < sizeof pre - 1 + sizeof suf ||
          strcmp(de->d_name + len - (sizeof suf - 1), suf))
        continue;
      size_t nl = len - (sizeof pre - 1) - (sizeof suf - 1);
      if (nl >= PLAIT_CHOICE_NAME) continue;
      char name[PLAIT_CHOICE_NAME];
      memcpy(name, de->d_name + sizeof pre - 1, nl);
      name[nl] = '\0';
      int seen = 0;
      for (int k = 0; k < n && !seen; k++) seen = !strcmp(names[k], name);
      if (!seen) snprintf(names[n++], PLAIT_CHOICE_NAME, "%s", name);
    }
    if (d) closedir(d);
  }
  return n;
}

int plait_choice_offers(const char *search_path, plait_choice_offer_t *out, int cap) {
  char names[64][PLAIT_CHOICE_NAME];
  int found = plugin_names(search_path, names, 64), n = 0;
  for (int i = 0; i < found; i++) {
    plait_plugin_t p;
    if (plait_plugin_load(&p, names[i], search_path)) { /* not ours to judge here */
      PLAIT_DEBUG("transport", "auto: %s: %s", names[i], plait_last_error());
      continue;
    }
    if (p.table->auto_place > 0 && n < cap) {
      memset(&out[n], 0, sizeof out[n]);
      memcpy(out[n].name, names[i], PLAIT_CHOICE_NAME); /* NUL-terminated there */
      out[n++].place = p.table->auto_place;
    }
    plait_plugin_unload(&p);
  }
  qsort(out, (size_t)n, sizeof *out, offer_cmp);
  return n;
}

/* Appends to a "; "-separated text, truncating. */
static void append(char *buf, size_t cap, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void append(char *buf, size_t cap, const char *fmt, ...) {
  size_t used = strlen(buf);
  if (used + 3 >= cap) return;
  if (used) used += (size_t)snprintf(buf + used, cap - used, "; ");
  va_list ap;
  va_start(ap, fmt);
  if (vsnprintf(buf + used, cap - used, fmt, ap) < 0) buf[used] = '\0';
  va_end(ap);
}

int plait_choice_decide(const char *const *names, int ncand, const plait_choice_fact_t *facts,
                        int nranks, const char *layout, char *why, size_t why_len) {
  char skipped[1024] = "";
  for (int c = 0; c < ncand; c++) {
    const plait_choice_fact_t *first = &facts[c];
    int bad = -1, differs = -1;
    for (int r = 0; r < nranks && bad < 0; r++) {
      const plait_choice_fact_t *f = &facts[(size_t)r * (size_t)ncand + (size_t)c];
      if (f->code != PLAIT_SUCCESS) bad = r;
      else if (differs < 0 && strcmp(f->detail, first->detail)) differs = r;
    }
    if (bad < 0 && differs < 0) {
      snprintf(why, why_len, "%s (%s%s%s)%s%s", names[c], first->detail,
               *first->detail ? "; " : "", layout, *skipped ? "; " : "", skipped);
      return c;
    }
    if (bad >= 0)
      append(skipped, sizeof skipped, "%s not used: rank %d: %s", names[c], bad,
             facts[(size_t)bad * (size_t)ncand + (size_t)c].detail);
    else
      append(skipped, sizeof skipped, "%s not used: rank 0 would use %s but rank %d %s",
             names[c], first->detail, differs,
             facts[(size_t)differs * (size_t)ncand + (size_t)c].detail);
  }
  snprintf(why, why_len, "no transport can start on every rank (%s): %s", layout, skipped);
  return -1;
}

/* This rank's finding about one candidate; the plugin stays loaded in p when
 * it can start. */
static void probe_one(const char *name, const plait_transport_init_args_t *args,
                      const char *search_path, plait_plugin_t *p, plait_choice_fact_t *f) {
  memset(f, 0, sizeof *f);
  plait_result_t rc = plait_plugin_load(p, name, search_path);
  if (rc) {
    PLAIT_DEBUG("transport", "auto: %s: %s", name, plait_last_error());
    f->code = rc;
    if (strstr(plait_last_error(), "not found; tried"))
      snprintf(f->detail, sizeof f->detail, "libplait-transport-%s.so not found", name);
    else
      snprintf(f->detail, sizeof f->detail, "%.*s", (int)strcspn(plait_last_error(), "\n"),
               plait_last_error());
    return;
  }
  if (!PLAIT_TRANSPORT_HAS(p->table, probe)) return; /* loads: taken as able to start */
  rc = p->table->probe(args, f->detail, sizeof f->detail);
  f->detail[sizeof f->detail - 1] = '\0';
  f->code = rc;
  PLAIT_DEBUG("transport", "auto: %s probe: %s: %s", name, plait_result_name(rc), f->detail);
  if (rc) plait_plugin_unload(p);
}

static void put_fact(unsigned char *w, const plait_choice_fact_t *f) {
  uint32_t v = (uint32_t)f->code;
  for (int i = 0; i < 4; i++) w[i] = (unsigned char)(v >> (8 * i));
  memcpy(w + 4, f->detail, PLAIT_CHOICE_DETAIL);
}

static void get_fact(const unsigned char *w, plait_choice_fact_t *f) {
  uint32_t v = 0;
  for (int i = 0; i < 4; i++) v |= (uint32_t)w[i] << (8 * i);
  f->code = (int32_t)v;
  memcpy(f->detail, w + 4, PLAIT_CHOICE_DETAIL);
  f->detail[PLAIT_CHOICE_DETAIL - 1] = '\0';
}

/* Every rank's offers, exchanged, merged alike on every rank into names. */
static plait_result_t exchange_offers(plait_boot_t *boot, const char *search_path, int nranks,
                                      plait_choice_offer_t *cands, int *n) {
  plait_choice_offer_t mine[PLAIT_CHOICE_MAX];
  memset(mine, 0, sizeof mine);
  plait_choice_offers(search_path, mine, PLAIT_CHOICE_MAX);
  for (int i = 0; i < PLAIT_CHOICE_MAX; i++) /* on the wire: little-endian */
    mine[i].place = (int32_t)htole32((uint32_t)mine[i].place);
  plait_choice_offer_t *all = calloc((size_t)nranks * PLAIT_CHOICE_MAX, sizeof *all);
  if (!all) return plait_error(PLAIT_ERR_NO_MEMORY, "out of memory");
  plait_result_t rc = plait_boot_allgather(boot, mine, sizeof mine, all);
  for (size_t i = 0; rc == PLAIT_SUCCESS && i < (size_t)nranks * PLAIT_CHOICE_MAX; i++) {
    all[i].place = (int32_t)le32toh((uint32_t)all[i].place);
    all[i].name[PLAIT_CHOICE_NAME - 1] = '\0';
  }
  if (rc == PLAIT_SUCCESS) *n = plait_choice_candidates(all, nranks, cands, PLAIT_CHOICE_MAX);
  free(all);
  return rc;
}

/* Ranks per CPU on this host, logged beside the choice. The order of the
 * candidates stays the same there: with 3 ranks on 2 cores (and on 1) ofi/shm
 * still ran the 200 x 64 KiB step 2-5x faster than Gloo (docs/performance.md,
 * "Oversubscription"); the ofi plugin's progress loop yields for less long
 * there before it sleeps (PLAIT_OFI_YIELD_US). */
static void log_crowding(const plait_transport_init_args_t *args) {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (args->nranks < 2 || sched_getaffinity(0, sizeof set, &set) != 0) return;
  const int cpus = CPU_COUNT(&set);
  const int level = args->rank == 0 ? PLAIT_LOG_INFO : PLAIT_LOG_DEBUG;
  PLAIT_LOG(level, "transport", "ranks per CPU: %d ranks on this host, %d CPU%s: %s",
            args->local_size, cpus, cpus == 1 ? "" : "s",
            args->local_size > cpus ? "oversubscribed" : "not oversubscribed");
}

plait_result_t plait_transport_auto(plait_boot_t *boot, const plait_transport_init_args_t *args,
                                    const char *search_path, plait_plugin_t *p) {
  plait_choice_offer_t cands[PLAIT_CHOICE_MAX];
  int n = 0;
  PLAIT_CHECK(exchange_offers(boot, search_path, args->nranks, cands, &n));
  if (n == 0) { /* the same on every rank: the offers were exchanged */
    char dirs[8192];
    plait_plugin_dirs(search_path, dirs, sizeof dirs);
    return plait_error(PLAIT_ERR_PLUGIN, "PLAIT_TRANSPORT=auto: no rank found a transport plugin "
                       "that offers itself to auto (a libplait-transport-<name>.so with "
                       "auto_place > 0) in %s (set PLAIT_PLUGIN_PATH to the folder of the "
                       "transport plugins, or choose one with PLAIT_TRANSPORT)", dirs);
  }
  const char *names[PLAIT_CHOICE_MAX];
  for (int c = 0; c < n; c++) names[c] = cands[c].name;
  size_t nranks = (size_t)args->nranks, row = (size_t)n * FACT_WIRE;
  plait_plugin_t loaded[PLAIT_CHOICE_MAX];
  memset(loaded, 0, sizeof loaded);
  unsigned char mine[PLAIT_CHOICE_MAX * FACT_WIRE];
  for (int c = 0; c < n; c++) {
    plait_choice_fact_t f;
    probe_one(names[c], args, search_path, &loaded[c], &f);
    put_fact(mine + (size_t)c * FACT_WIRE, &f);
  }
  unsigned char *wire = malloc(nranks * row);
  plait_choice_fact_t *facts = calloc(nranks * (size_t)n, sizeof *facts);
  plait_result_t rc = wire && facts ? plait_boot_allgather(boot, mine, row, wire)
                                    : plait_error(PLAIT_ERR_NO_MEMORY, "out of memory");
  int chosen = -1;
  char why[1536];
  if (rc == PLAIT_SUCCESS) {
    for (size_t i = 0; i < nranks * (size_t)n; i++) get_fact(wire + i * FACT_WIRE, &facts[i]);
    char layout[96];
    if (nranks == 1)
      snprintf(layout, sizeof layout, "one rank");
    else if (args->local_size == args->nranks && args->cross_size <= 1)
      snprintf(layout, sizeof layout, "all %d ranks on one host", args->nranks);
    else
      snprintf(layout, sizeof layout, "%d ranks on several hosts", args->nranks);
    chosen = plait_choice_decide(names, n, facts, args->nranks, layout, why, sizeof why);
    if (chosen < 0)
      rc = plait_error(PLAIT_ERR_PLUGIN, "PLAIT_TRANSPORT=auto: %s (set PLAIT_PLUGIN_PATH to the "
                       "folder of the transport plugins, or choose one with PLAIT_TRANSPORT)",
                       why);
  }
  for (int c = 0; c < n; c++)
    if (c != chosen) plait_plugin_unload(&loaded[c]);
  if (chosen >= 0) {
    *p = loaded[chosen];
    if (args->rank == 0)
      PLAIT_INFO("transport", "transport auto: %s", why);
    else
      PLAIT_DEBUG("transport", "transport auto: %s", why);
    log_crowding(args);
  }
  free(wire);
  free(facts);
  return rc;
}
