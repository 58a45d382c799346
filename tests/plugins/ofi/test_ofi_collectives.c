/*
 * The ofi (libfabric) transport plugin, called directly: the same matrix as
 * the gloo plugin (tests/harness/transport_matrix.c: 2, 3 and 4 ranks; sizes
 * 0, 1, odd, not divisible by the rank count, 8 MiB; every dtype and op) on
 * FI_PROVIDER=tcp (tcp;ofi_rxm) and FI_PROVIDER=shm, plus each algorithm
 * forced where the default switch points would not pick it, memory
 * registration forced on, lost ranks, bad settings, and no threads or file
 * descriptors left behind. A provider that cannot start here is skipped with
 * the plugin's reason.
 */
#include <criterion/criterion.h>

#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "api/core.h"
#include "ofi_job.h"
#include "transport_matrix.h"

#define ENV(...) ((const char *const[]){__VA_ARGS__, NULL})

static void run_job(const char *prov, int nranks, tm_body_fn body) {
  ofi_run_job(prov, nranks, body, NULL);
}

/* These tests call the plugin directly from the main thread: no coordinator. */
static void no_coordinator(void) { plait_core_test_without_coordinator(1); }
TestSuite(ofi, .init = no_coordinator);

#define PER_RANK_COUNT(prov, name, body)                                          \
  Test(ofi, prov##_##name##_2ranks, .timeout = 60) { run_job(#prov, 2, body); }   \
  Test(ofi, prov##_##name##_3ranks, .timeout = 60) { run_job(#prov, 3, body); }   \
  Test(ofi, prov##_##name##_4ranks, .timeout = 60) { run_job(#prov, 4, body); }

#define MATRIX(prov)                                                           \
  PER_RANK_COUNT(prov, allreduce, tm_allreduce)                                \
  PER_RANK_COUNT(prov, allgatherv, tm_allgatherv)                              \
  PER_RANK_COUNT(prov, broadcast, tm_broadcast)                                \
  PER_RANK_COUNT(prov, alltoallv, tm_alltoallv)                                \
  PER_RANK_COUNT(prov, reducescatter, tm_reducescatter)                        \
  PER_RANK_COUNT(prov, barrier, tm_barrier)                                    \
  PER_RANK_COUNT(prov, subsets, tm_subsets)

MATRIX(shm)
MATRIX(tcp)

/* A job of one rank opens no endpoint: every call is local. */
Test(ofi, everything_1rank, .timeout = 60) { run_job("shm", 1, tm_everything); }

Test(ofi, shm_errors_and_memory_2ranks, .timeout = 60) { run_job("shm", 2, tm_errors); }
Test(ofi, tcp_errors_and_memory_3ranks, .timeout = 60) { run_job("tcp", 3, tm_errors); }

/* ------------------------------------------------------------------------ */
/* Each algorithm where the default switch points would not pick it          */
/* ------------------------------------------------------------------------ */

static int body_collectives(tm_ctx_t *c) {
  return tm_allreduce(c) || tm_allgatherv(c) || tm_broadcast(c) || tm_reducescatter(c);
}

/* The ring / chain for every size, in 4 KiB chunks with 2 in flight: empty
 * blocks (count < ranks), many chunks, the windows full (direct reads off:
 * over shm they would replace the allreduce ring). */
#define LARGE_EVERYWHERE                                                       \
  ENV("PLAIT_OFI_ALLREDUCE_RING_MIN=0", "PLAIT_OFI_ALLGATHERV_RING_MIN=0",     \
      "PLAIT_OFI_BROADCAST_CHAIN_MIN=0", "PLAIT_OFI_REDUCESCATTER_RING_MIN=0", \
      "PLAIT_OFI_CHUNK=4K", "PLAIT_OFI_WINDOW=2", "PLAIT_OFI_DIRECT=off")
/* Direct reads for every allreduce size (shm): empty blocks, one element. */
#define DIRECT_EVERYWHERE ENV("PLAIT_OFI_ALLREDUCE_RING_MIN=0")
/* Recursive doubling, direct and binomial for every size, 8 MiB included. */
#define SMALL_EVERYWHERE                                                       \
  ENV("PLAIT_OFI_ALLREDUCE_RING_MIN=1T", "PLAIT_OFI_ALLGATHERV_RING_MIN=1T",   \
      "PLAIT_OFI_BROADCAST_CHAIN_MIN=1T", "PLAIT_OFI_REDUCESCATTER_RING_MIN=1T")

Test(ofi, shm_large_algorithms_everywhere_3ranks, .timeout = 90) {
  ofi_run_job("shm", 3, body_collectives, LARGE_EVERYWHERE);
}
Test(ofi, tcp_large_algorithms_everywhere_4ranks, .timeout = 90) {
  ofi_run_job("tcp", 4, body_collectives, LARGE_EVERYWHERE);
}
Test(ofi, shm_direct_reads_everywhere_3ranks, .timeout = 90) {
  ofi_run_job("shm", 3, body_collectives, DIRECT_EVERYWHERE);
}
Test(ofi, shm_small_algorithms_everywhere_3ranks, .timeout = 90) {
  ofi_run_job("shm", 3, body_collectives, SMALL_EVERYWHERE);
}
Test(ofi, tcp_small_algorithms_everywhere_4ranks, .timeout = 90) {
  ofi_run_job("tcp", 4, body_collectives, SMALL_EVERYWHERE);
}

/* shm without CMA moves large messages through a small pool of bounce
 * buffers (SAR); with more sends than receives in flight the ring once
 * filled it with messages the receiver was not ready for and hung (at 16 MiB
 * and more, 2 ranks). */
static int body_large_ring(tm_ctx_t *c) {
  return tm_allreduce_one(c, PLAIT_FLOAT32, PLAIT_OP_SUM, 8 * 1024 * 1024) ||
         tm_allreduce_one(c, PLAIT_INT32, PLAIT_OP_MAX, 5 * 1024 * 1024 + 3);
}

Test(ofi, shm_without_cma_large_ring_2ranks, .timeout = 90) {
  ofi_run_job("shm", 2, body_large_ring, ENV("FI_SHM_DISABLE_CMA=1"));
}
Test(ofi, shm_without_cma_3ranks, .timeout = 90) {
  ofi_run_job("shm", 3, body_collectives, ENV("FI_SHM_DISABLE_CMA=1"));
}

/* ------------------------------------------------------------------------ */
/* allreduce_spans: which way the plugin takes                               */
/* ------------------------------------------------------------------------ */

#if __has_include(<rdma/fabric.h>)
#include "state.h" /* the plugin's own: its counters of each way */
#include "../../harness/transport_calls.h"

/* Runs one allreduce_spans and checks which way the plugin went: 'd' direct
 * reads, 'r' the ring in place, 'p' packed. */
static int spans_way(tm_ctx_t *c, const size_t *counts, size_t n, char way, const char *layout) {
  const ofi_state_t *st = c->st;
  uint64_t d0 = st->spans_direct, r0 = st->spans_in_place, p0 = st->spans_packed;
  if (tm_spans_one(c, PLAIT_FLOAT32, PLAIT_OP_SUM, 0.5, counts, n, layout)) return 1;
  uint64_t d = st->spans_direct - d0, r = st->spans_in_place - r0, p = st->spans_packed - p0;
  if (d != (way == 'd') || r != (way == 'r') || p != (way == 'p')) {
    plait_test_say(c->rank, "%s: expected %s, got %llu direct, %llu in place and %llu packed",
                   layout, way == 'd' ? "direct reads" : way == 'r' ? "the ring in place" : "packed",
                   (unsigned long long)d, (unsigned long long)r, (unsigned long long)p);
    return 1;
  }
  return 0;
}

static size_t g_grads[40], g_tiny[300], g_few[4] = {16384, 16384, 16384, 16384};
static void layouts(void) {
  for (size_t i = 0; i < 40; i++) g_grads[i] = 16384 + i;
  for (size_t i = 0; i < 300; i++) g_tiny[i] = 1 + (i * 37) % 250;
}

/* Defaults over shm: 64 KiB gradients read directly, tiny ones too where
 * the ring would run (3 ranks: from 64 KiB in all), and too little for a
 * ring (2 ranks: under 1 MiB) packed. */
static int body_spans_shm(tm_ctx_t *c) {
  layouts();
  return spans_way(c, g_grads, 40, 'd', "40 x 64 KiB") ||
         spans_way(c, g_tiny, 300, c->nranks > 2 ? 'd' : 'p', "300 tiny") ||
         spans_way(c, g_few, 4, c->nranks > 2 ? 'd' : 'p', "4 x 64 KiB");
}
/* Defaults over tcp (no direct reads): the ring in place, tiny ones packed. */
static int body_spans_tcp(tm_ctx_t *c) {
  layouts();
  return spans_way(c, g_grads, 40, 'r', "40 x 64 KiB") ||
         spans_way(c, g_tiny, 300, 'p', "300 tiny") ||
         spans_way(c, g_few, 4, c->nranks > 2 ? 'r' : 'p', "4 x 64 KiB");
}
/* The ring forced over tiny spans, small chunks: most messages carry
 * iov_limit pieces, blocks start and end inside spans. */
static int body_spans_ring(tm_ctx_t *c) {
  layouts();
  return spans_way(c, g_tiny, 300, 'r', "300 tiny, the ring forced") || tm_allreduce_spans(c);
}
/* Direct reads forced for every size: the whole spans matrix (4 ranks: a
 * block's owner folds two peers before its own turn comes). */
static int body_spans_direct(tm_ctx_t *c) {
  layouts();
  return spans_way(c, g_tiny, 300, 'd', "300 tiny, direct forced") || tm_allreduce_spans(c);
}
/* Without direct reads (CMA disabled, registration on): never direct. */
static int body_spans_ring_default(tm_ctx_t *c) {
  layouts();
  return spans_way(c, g_grads, 40, 'r', "40 x 64 KiB, no CMA");
}
static int body_spans_registered(tm_ctx_t *c) {
  layouts();
  return spans_way(c, g_grads, 40, 'p', "40 x 64 KiB, registering");
}
#define SPANS_RING                                                             \
  ENV("PLAIT_OFI_DIRECT=off", "PLAIT_OFI_SPANS_MIN=0", "PLAIT_OFI_ALLREDUCE_RING_MIN=0",      \
      "PLAIT_OFI_CHUNK=4K", "PLAIT_OFI_WINDOW=2")
Test(ofi, shm_spans_default_ways_2ranks, .timeout = 60) { run_job("shm", 2, body_spans_shm); }
Test(ofi, shm_spans_default_ways_3ranks, .timeout = 60) { run_job("shm", 3, body_spans_shm); }
Test(ofi, tcp_spans_default_ways_3ranks, .timeout = 60) { run_job("tcp", 3, body_spans_tcp); }
Test(ofi, shm_spans_ring_forced_3ranks, .timeout = 90) {
  ofi_run_job("shm", 3, body_spans_ring, SPANS_RING);
}
Test(ofi, tcp_spans_ring_forced_2ranks, .timeout = 90) {
  ofi_run_job("tcp", 2, body_spans_ring, SPANS_RING);
}
Test(ofi, shm_spans_direct_forced_2ranks, .timeout = 90) {
  ofi_run_job("shm", 2, body_spans_direct, ENV("PLAIT_OFI_ALLREDUCE_RING_MIN=0"));
}
Test(ofi, shm_spans_direct_forced_4ranks, .timeout = 90) {
  ofi_run_job("shm", 4, body_spans_direct, ENV("PLAIT_OFI_ALLREDUCE_RING_MIN=0"));
}
Test(ofi, shm_spans_without_cma_2ranks, .timeout = 60) {
  ofi_run_job("shm", 2, body_spans_ring_default, ENV("FI_SHM_DISABLE_CMA=1"));
}
Test(ofi, shm_spans_direct_off_2ranks, .timeout = 60) {
  ofi_run_job("shm", 2, body_spans_ring_default, ENV("PLAIT_OFI_DIRECT=off"));
}
Test(ofi, shm_spans_registration_always_2ranks, .timeout = 60) {
  ofi_run_job("shm", 2, body_spans_registered, ENV("PLAIT_OFI_MR=always"));
}

/* A large tensor fused with others goes into huge pages as it would alone
 * (hugepages.h: the second time its range comes), in place and out of
 * place; a small one never. Read from the plugin's counters, so it holds
 * whether or not this kernel collapses (collapsed + refused). */
static int body_spans_huge_pages(tm_ctx_t *c) {
  const size_t MiB = (size_t)1 << 20, big = 8 * MiB / 4, small = 16384;
  float *mem[3], *tiny = malloc(small * sizeof *tiny);
  for (int i = 0; i < 3; i++) {
    mem[i] = mmap(NULL, 10 * MiB, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (mem[i] == MAP_FAILED || !tiny) {
      plait_test_say(c->rank, "out of memory for the test's buffers");
      return 1;
    }
  }
  const ofi_state_t *st = c->st;
  /* one in place, one out of place (mem[1] into mem[2]), a small one */
  plait_span_t spans[3] = {{mem[0], mem[0], big}, {mem[2], mem[1], big}, {tiny, tiny, small}};
  const uint64_t expect[3] = {0, 3, 3}; /* ranges moved after each call: mem[0..2] */
  uint64_t base = st->huge.collapsed + st->huge.refused;
  int bad = 0;
  for (int call = 0; call < 3 && !bad; call++) {
    for (int i = 0; i < 3; i++)
      tm_fill(PLAIT_FLOAT32, PLAIT_OP_SUM, c->rank, c->nranks, (void *)spans[i].src,
              spans[i].count, 0);
    plait_result_t rc =
        tc_allreduce_spans(c->t, c->st, spans, 3, PLAIT_FLOAT32, PLAIT_OP_SUM, 1.0);
    for (int i = 0; i < 3 && !rc && !bad; i++) {
      long wrong = tm_check(PLAIT_FLOAT32, PLAIT_OP_SUM, c->nranks, spans[i].dst, spans[i].count, 0);
      if (wrong >= 0) {
        plait_test_say(c->rank, "call %d: span %d wrong at element %ld", call + 1, i, wrong);
        bad = 1;
      }
    }
    uint64_t moved = st->huge.collapsed + st->huge.refused - base;
    if (rc || moved != expect[call]) {
      plait_test_say(c->rank, "call %d: %s; %llu ranges moved into huge pages, expected %llu",
                     call + 1, rc ? c->t->last_error(c->st) : "ok", (unsigned long long)moved,
                     (unsigned long long)expect[call]);
      bad = 1;
    }
  }
  for (int i = 0; i < 3; i++) munmap(mem[i], 10 * MiB);
  free(tiny);
  return bad;
}
Test(ofi, shm_spans_large_tensors_into_huge_pages_2ranks, .timeout = 60) {
  run_job("shm", 2, body_spans_huge_pages);
}

/* Small tensors fused side by side (a step's 64 KiB gradients) go into huge
 * pages by the 2 MiB windows they fill (hugepages.h): dense ones the second
 * time they come; never sparse ones (a tensor every 512 KiB covers an eighth
 * of its windows), nor a fused allreduce smaller than huge_min in all. */
static int body_spans_small_huge_windows(tm_ctx_t *c) {
  const size_t MiB = (size_t)1 << 20, HUGEW = 2 * MiB, piece = 64 * 1024;
  const size_t len = 10 * MiB; /* 8 MiB of 2 MiB-aligned windows, with room to align */
  char *raw = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (raw == MAP_FAILED) {
    plait_test_say(c->rank, "out of memory for the test's buffers");
    return 1;
  }
  char *base = (char *)(((uintptr_t)raw + HUGEW - 1) & ~(uintptr_t)(HUGEW - 1));
  enum { DENSE = 128, SPARSE = 16, FEW = 16 };
  plait_span_t dense[DENSE], sparse[SPARSE], few[FEW];
  for (int i = 0; i < DENSE; i++) /* 4 windows, full */
    dense[i] = (plait_span_t){base + i * piece, base + i * piece, piece / 4};
  for (int i = 0; i < SPARSE; i++) /* 4 windows, an eighth each: 1 MiB in all */
    sparse[i] = (plait_span_t){base + i * 8 * piece, base + i * 8 * piece, piece / 4};
  for (int i = 0; i < FEW; i++) /* half a window, 1 MiB in all: below huge_min */
    few[i] = (plait_span_t){base + i * piece, base + i * piece, piece / 4};
  struct {
    const char *what;
    plait_span_t *spans;
    size_t n;
    uint64_t expect[3]; /* windows moved after each call */
  } cases[] = {{"sparse", sparse, SPARSE, {0, 0, 0}},
               {"too few", few, FEW, {0, 0, 0}},
               {"dense", dense, DENSE, {0, 4, 4}}};
  const ofi_state_t *st = c->st;
  int bad = 0;
  for (size_t k = 0; k < sizeof cases / sizeof cases[0] && !bad; k++) {
    uint64_t before = st->huge.collapsed + st->huge.refused;
    for (int call = 0; call < 3 && !bad; call++) {
      for (size_t i = 0; i < cases[k].n; i++)
        tm_fill(PLAIT_FLOAT32, PLAIT_OP_SUM, c->rank, c->nranks, (void *)cases[k].spans[i].src,
                cases[k].spans[i].count, 0);
      plait_result_t rc = tc_allreduce_spans(c->t, c->st, cases[k].spans, cases[k].n, PLAIT_FLOAT32,
                                                PLAIT_OP_SUM, 1.0);
      for (size_t i = 0; i < cases[k].n && !rc && !bad; i++) {
        long wrong = tm_check(PLAIT_FLOAT32, PLAIT_OP_SUM, c->nranks, cases[k].spans[i].dst,
                              cases[k].spans[i].count, 0);
        if (wrong >= 0) {
          plait_test_say(c->rank, "%s, call %d: span %zu wrong at element %ld", cases[k].what,
                         call + 1, i, wrong);
          bad = 1;
        }
      }
      uint64_t moved = st->huge.collapsed + st->huge.refused - before;
      if (rc || moved != cases[k].expect[call]) {
        plait_test_say(c->rank, "%s, call %d: %s; %llu windows moved into huge pages, expected "
                       "%llu", cases[k].what, call + 1, rc ? c->t->last_error(c->st) : "ok",
                       (unsigned long long)moved, (unsigned long long)cases[k].expect[call]);
        bad = 1;
      }
    }
  }
  munmap(raw, len);
  return bad;
}
Test(ofi, shm_spans_small_tensors_into_huge_pages_by_window_2ranks, .timeout = 60) {
  run_job("shm", 2, body_spans_small_huge_windows);
}
#endif

/* ------------------------------------------------------------------------ */
/* Memory registration                                                       */
/* ------------------------------------------------------------------------ */

/* allreduce in memory from mem_alloc (cached registration, as the core's
 * fusion buffer) and in malloc'd memory (registered per call), ring and
 * recursive doubling, with PLAIT_OFI_MR=always. */
static int body_registered(tm_ctx_t *c) {
  const size_t counts[] = {1001, 3 * 1024 * 1024 + 7};
  for (int k = 0; k < 2; k++) {
    size_t n = counts[k];
    void *p = NULL;
    plait_result_t rc = c->t->mem_alloc(c->st, n * 4, &p);
    if (rc != PLAIT_SUCCESS) {
      plait_test_say(c->rank, "mem_alloc: %s", c->t->last_error(c->st));
      return 1;
    }
    for (int round = 0; round < 3; round++) {
      tm_fill(PLAIT_FLOAT32, PLAIT_OP_SUM, c->rank, c->nranks, p, n, 0);
      rc = tc_allreduce(c->t, c->st, p, n, PLAIT_FLOAT32, PLAIT_OP_SUM);
      long bad = rc ? -1 : tm_check(PLAIT_FLOAT32, PLAIT_OP_SUM, c->nranks, p, n, 0);
      if (rc || bad >= 0) {
        plait_test_say(c->rank, "allreduce of %zu in a mem_alloc buffer: %s, bad element %ld",
                       n, rc ? c->t->last_error(c->st) : "ok", bad);
        c->t->mem_free(c->st, p);
        return 1;
      }
    }
    c->t->mem_free(c->st, p);
    if (tm_allreduce_one(c, PLAIT_INT32, PLAIT_OP_MAX, n)) return 1;
  }
  return tm_broadcast(c) || tm_alltoallv(c) || tm_reducescatter(c);
}

Test(ofi, shm_registration_always_3ranks, .timeout = 60) {
  ofi_run_job("shm", 3, body_registered, ENV("PLAIT_OFI_MR=always"));
}
Test(ofi, tcp_registration_always_2ranks, .timeout = 60) {
  ofi_run_job("tcp", 2, body_registered, ENV("PLAIT_OFI_MR=always"));
}

/* Whether the mapping holding addr is marked for transparent huge pages
 * (MADV_HUGEPAGE: "hg" in its VmFlags); -1 when smaps cannot tell. */
static int marked_huge(const void *addr) {
  FILE *f = fopen("/proc/self/smaps", "r");
  if (!f) return -1;
  char line[1024];
  int inside = 0, found = -1;
  while (found < 0 && fgets(line, sizeof line, f)) {
    unsigned long lo, hi;
    if (sscanf(line, "%lx-%lx ", &lo, &hi) == 2 && strchr(line, '-') < strchr(line, ' '))
      inside = (uintptr_t)addr >= lo && (uintptr_t)addr < hi;
    else if (inside && strncmp(line, "VmFlags:", 8) == 0)
      found = strstr(line, " hg") != NULL;
  }
  fclose(f);
  return found;
}

/* The core's fusion buffer over ofi holds one 1 MiB piece: from 1 MiB on,
 * mem_alloc gives 2 MiB-aligned memory marked for huge pages (shm's CMA then
 * pins one page per 2 MiB, not 512), and below that ordinary memory; both
 * reduce right. */
static int body_huge_from_1mib(tm_ctx_t *c) {
  const size_t sizes[] = {(size_t)1 << 20, ((size_t)1 << 20) + 4, ((size_t)1 << 20) - 4096};
  const int huge[] = {1, 1, 0};
  for (int k = 0; k < 3; k++) {
    void *p = NULL;
    if (c->t->mem_alloc(c->st, sizes[k], &p) != PLAIT_SUCCESS || !p) {
      plait_test_say(c->rank, "mem_alloc(%zu): %s", sizes[k], c->t->last_error(c->st));
      return 1;
    }
    int aligned = (uintptr_t)p % ((size_t)2 << 20) == 0, marked = marked_huge(p);
    int bad = marked < 0 || (huge[k] && (!aligned || !marked)) || (!huge[k] && marked) ||
              (uintptr_t)p % 64 != 0;
    if (bad)
      plait_test_say(c->rank, "mem_alloc(%zu) gave %p: 2 MiB-aligned %d, MADV_HUGEPAGE %d; "
                     "expected %d", sizes[k], p, aligned, marked, huge[k]);
    size_t n = sizes[k] / 4;
    if (!bad) {
      tm_fill(PLAIT_FLOAT32, PLAIT_OP_SUM, c->rank, c->nranks, p, n, 0);
      plait_result_t rc = tc_allreduce(c->t, c->st, p, n, PLAIT_FLOAT32, PLAIT_OP_SUM);
      long wrong = rc ? -1 : tm_check(PLAIT_FLOAT32, PLAIT_OP_SUM, c->nranks, p, n, 0);
      if (rc || wrong >= 0) {
        plait_test_say(c->rank, "allreduce of %zu in a mem_alloc buffer: %s, bad element %ld",
                       n, rc ? c->t->last_error(c->st) : "ok", wrong);
        bad = 1;
      }
    }
    c->t->mem_free(c->st, p);
    if (bad) return 1;
  }
  return 0;
}

Test(ofi, shm_mem_alloc_from_1mib_is_huge_page_memory_2ranks, .timeout = 60) {
  run_job("shm", 2, body_huge_from_1mib);
}

/* ------------------------------------------------------------------------ */
/* A rank lost mid-job                                                       */
/* ------------------------------------------------------------------------ */

static void run_lost_rank(const char *prov, int nranks, tm_loss_t how) {
  ofi_require_plugin();
  char fi[64], reason[1024] = "";
  snprintf(fi, sizeof fi, "FI_PROVIDER=%s", prov);
  plait_test_job_t job;
  if (tm_run_lost_rank("ofi", nranks, how, ENV(fi), &job, reason, sizeof reason) == TM_SKIPPED)
    cr_skip_test("FI_PROVIDER=%s cannot start here: %s", prov, reason);
  char why[256] = "";
  cr_expect_eq(tm_check_lost_rank(&job, nranks, how, why, sizeof why), 0, "%s", why);
}

Test(ofi, shm_rank_killed_between_ops_2ranks, .timeout = 60) {
  run_lost_rank("shm", 2, TM_KILLED_BETWEEN_OPS);
}
Test(ofi, tcp_rank_killed_between_ops_2ranks, .timeout = 60) {
  run_lost_rank("tcp", 2, TM_KILLED_BETWEEN_OPS);
}
Test(ofi, shm_rank_killed_mid_allreduce_3ranks, .timeout = 60) {
  run_lost_rank("shm", 3, TM_KILLED_MID_ALLREDUCE);
}
Test(ofi, tcp_rank_killed_mid_allreduce_3ranks, .timeout = 60) {
  run_lost_rank("tcp", 3, TM_KILLED_MID_ALLREDUCE);
}
Test(ofi, shm_rank_killed_mid_spans_3ranks, .timeout = 60) {
  run_lost_rank("shm", 3, TM_KILLED_MID_SPANS);
}
Test(ofi, shm_rank_hung_3ranks, .timeout = 60) { run_lost_rank("shm", 3, TM_HUNG); }
Test(ofi, tcp_rank_hung_2ranks, .timeout = 60) { run_lost_rank("tcp", 2, TM_HUNG); }

/* ------------------------------------------------------------------------ */
/* Nothing left behind                                                       */
/* ------------------------------------------------------------------------ */

static int count_entries(const char *dir) {
  DIR *d = opendir(dir);
  if (!d) return -1;
  int n = 0;
  struct dirent *e;
  while ((e = readdir(d)) != NULL) n += e->d_name[0] != '.';
  closedir(d);
  return n;
}

/* Two init / collectives / shutdown cycles: no thread may outlive a cycle,
 * and the second cycle may leave no file descriptor the first did not
 * (libfabric opens some once per process). */
static int body_cycle(tm_ctx_t *c) {
  return tm_allreduce_one(c, PLAIT_FLOAT32, PLAIT_OP_SUM, 3 * 1024 * 1024) ||
         tm_allreduce_one(c, PLAIT_INT8, PLAIT_OP_MAX, 7) || tm_barrier(c);
}

static int leak_rank(int rank, int nranks, void *arg) {
  (void)arg;
  int threads[3], fds[3];
  threads[0] = count_entries("/proc/self/task");
  fds[0] = count_entries("/proc/self/fd");
  for (int cycle = 1; cycle <= 2; cycle++) {
    plait_result_t rc = plait_init();
    if (rc != PLAIT_SUCCESS) {
      plait_test_say(rank, "plait_init (cycle %d): %s: %s", cycle, plait_result_name(rc),
                     plait_last_error());
      return rc == PLAIT_ERR_UNSUPPORTED ? 77 : 1;
    }
    tm_ctx_t c = {rank, nranks, NULL, NULL};
    c.t = plait_core_transport(&c.st);
    if (!c.t || strcmp(c.t->name, "ofi") != 0 || body_cycle(&c)) return 1;
    if (plait_shutdown() != PLAIT_SUCCESS) return 1;
    threads[cycle] = count_entries("/proc/self/task");
    fds[cycle] = count_entries("/proc/self/fd");
  }
  plait_test_say(rank, "threads %d / %d / %d, fds %d / %d / %d (before, after 1, after 2)",
                 threads[0], threads[1], threads[2], fds[0], fds[1], fds[2]);
  if (threads[1] != threads[0] || threads[2] != threads[0] || fds[2] != fds[1]) return 1;
  return 0;
}

static void run_leaks(const char *prov) {
  ofi_require_plugin();
  char fi[64];
  snprintf(fi, sizeof fi, "FI_PROVIDER=%s", prov);
  const char *env[] = {"PLAIT_TRANSPORT=ofi", "PLAIT_TIMEOUT_S=15", fi, NULL};
  plait_test_job_t job;
  memset(&job, 0, sizeof job);
  job.nranks = 2;
  job.timeout_s = 50;
  job.env = env;
  plait_test_run_ranks(&job, leak_rank, NULL);
  if (job.exit_code[0] == 77 || job.exit_code[1] == 77)
    cr_skip_test("FI_PROVIDER=%s cannot start here (see the message above)", prov);
  for (int r = 0; r < 2; r++)
    cr_expect_eq(job.exit_code[r], 0, "rank %d: threads or file descriptors left (see above)",
                 r);
}

Test(ofi, shm_no_threads_or_fds_left, .timeout = 60) { run_leaks("shm"); }
Test(ofi, tcp_no_threads_or_fds_left, .timeout = 60) { run_leaks("tcp"); }

/* ------------------------------------------------------------------------ */
/* Bad settings                                                              */
/* ------------------------------------------------------------------------ */

typedef struct expect_init {
  plait_result_t code;
  const char *words[4];
} expect_init_t;

/* plait_init must fail with the code and a message holding every word. */
static int init_fails(int rank, int nranks, void *arg) {
  (void)nranks;
  const expect_init_t *e = arg;
  plait_result_t rc = plait_init();
  const char *msg = plait_last_error();
  if (rc == PLAIT_SUCCESS) {
    plait_shutdown();
    plait_test_say(rank, "plait_init succeeded, expected %s", plait_result_name(e->code));
    return 1;
  }
  plait_test_say(rank, "plait_init: %s: %s", plait_result_name(rc), msg);
  if (rc != e->code && rank == 0) return 1;
  for (int i = 0; rank == 0 && i < 4 && e->words[i]; i++)
    if (!strstr(msg, e->words[i])) {
      plait_test_say(rank, "the message does not say '%s'", e->words[i]);
      return 1;
    }
  return 0;
}

static void run_init_fails(int nranks, const char *const *env, const expect_init_t *e) {
  ofi_require_plugin();
  plait_test_job_t job;
  memset(&job, 0, sizeof job);
  job.nranks = nranks;
  job.timeout_s = 30;
  const char *all[8];
  int k = 0;
  for (; env && *env && k < 7; env++) all[k++] = *env;
  all[k] = NULL;
  job.env = all;
  plait_test_run_ranks(&job, init_fails, (void *)e);
  cr_expect_eq(job.exit_code[0], 0, "rank 0 did not fail as expected (see above)");
}

Test(ofi, bad_setting_is_named, .timeout = 30) {
  expect_init_t e = {PLAIT_ERR_CONFIG, {"PLAIT_OFI_CHUNK", "'64Q'", "64K"}};
  run_init_fails(1, ENV("PLAIT_TRANSPORT=ofi", "PLAIT_OFI_CHUNK=64Q"), &e);
  expect_init_t w = {PLAIT_ERR_CONFIG, {"PLAIT_OFI_WINDOW", "'0'", "1 to 64"}};
  run_init_fails(1, ENV("PLAIT_TRANSPORT=ofi", "PLAIT_OFI_WINDOW=0"), &w);
  expect_init_t m = {PLAIT_ERR_CONFIG, {"PLAIT_OFI_MR", "'sometimes'", "always"}};
  run_init_fails(1, ENV("PLAIT_TRANSPORT=ofi", "PLAIT_OFI_MR=sometimes"), &m);
}

Test(ofi, unknown_provider_is_named, .timeout = 30) {
  expect_init_t e = {PLAIT_ERR_UNSUPPORTED, {"FI_PROVIDER=nosuch", "fi_getinfo", "ofi"}};
  run_init_fails(2, ENV("PLAIT_TRANSPORT=ofi", "PLAIT_TIMEOUT_S=5", "FI_PROVIDER=nosuch"), &e);
}

/* Other providers: nothing in the plugin is specific to shm or tcp. */
Test(ofi, sockets_everything_2ranks, .timeout = 90) { run_job("sockets", 2, tm_everything); }

/* ------------------------------------------------------------------------ */
/* Ranks on several hosts (simulated with PLAIT_HOSTNAME)                    */
/* ------------------------------------------------------------------------ */

/* Each rank claims its own host; shm, which reaches one host only, must not
 * be chosen: unset FI_PROVIDER picks another provider, FI_PROVIDER=shm is
 * refused with a message saying why. */
static int two_hosts_rank(int rank, int nranks, void *arg) {
  int want_shm = arg != NULL;
  char host[32];
  snprintf(host, sizeof host, "host%d", rank);
  setenv("PLAIT_HOSTNAME", host, 1);
  unsetenv("PLAIT_LOCAL_RANK");
  unsetenv("PLAIT_LOCAL_SIZE");
  if (want_shm) setenv("FI_PROVIDER", "shm", 1);
  else unsetenv("FI_PROVIDER");
  plait_result_t rc = plait_init();
  if (want_shm) {
    const char *msg = plait_last_error();
    plait_test_say(rank, "plait_init: %s: %s", plait_result_name(rc), msg);
    if (rc == PLAIT_SUCCESS) plait_shutdown();
    return !(rc == PLAIT_ERR_UNSUPPORTED && strstr(msg, "several hosts") && strstr(msg, "shm"));
  }
  if (rc != PLAIT_SUCCESS) {
    plait_test_say(rank, "plait_init: %s: %s", plait_result_name(rc), plait_last_error());
    return 1;
  }
  tm_ctx_t c = {rank, nranks, NULL, NULL};
  c.t = plait_core_transport(&c.st);
  int fails = !c.t || strcmp(c.t->name, "ofi") != 0 ||
              tm_allreduce_one(&c, PLAIT_FLOAT32, PLAIT_OP_SUM, 300000) || tm_barrier(&c);
  return plait_shutdown() != PLAIT_SUCCESS || fails;
}

static void run_two_hosts(int want_shm) {
  ofi_require_plugin();
  const char *env[] = {"PLAIT_TRANSPORT=ofi", "PLAIT_TIMEOUT_S=15", NULL};
  plait_test_job_t job;
  memset(&job, 0, sizeof job);
  job.nranks = 2;
  job.timeout_s = 50;
  job.env = env;
  plait_test_run_ranks(&job, two_hosts_rank, want_shm ? (void *)1 : NULL);
  for (int r = 0; r < 2; r++)
    cr_expect_eq(job.exit_code[r], 0, "rank %d failed (see above)", r);
}

Test(ofi, two_hosts_never_pick_shm, .timeout = 60) { run_two_hosts(0); }
Test(ofi, two_hosts_refuse_fi_provider_shm, .timeout = 60) { run_two_hosts(1); }
