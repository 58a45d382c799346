/*
 * The helpers the "devsim" test plugin (tests/plugins/devsim.c) exports to
 * tests: devsim simulates a GPU transport on the host (see devsim.c), and a
 * test reaches its "device memory", its streams, its completion gate and
 * its counters through these functions, found with dlsym in the rank that
 * loaded the plugin (devsim_api_load). Every helper may be called from any
 * thread, before, during or after plait_init.
 */
#ifndef PLAIT_TEST_DEVSIM_H
#define PLAIT_TEST_DEVSIM_H

#include <stddef.h>
#include <stdint.h>

/* A device pointer is the real host address plus this: never dereferenceable
 * (non-canonical on x86-64), so any access by the core crashes the test. */
#define DEVSIM_DISGUISE (1ull << 62)

/* One batch_copy call, as devsim recorded it. */
typedef struct devsim_batch_record {
  size_t spans;    /* n */
  size_t identity; /* spans with src NULL */
  size_t elements; /* sum of the spans' counts */
  int dtype, op;
  double factor;
} devsim_batch_record_t;

/* Counters since load or devsim_counters_reset. */
typedef struct devsim_counters {
  uint64_t batch_copy_calls, batch_copy_spans, identity_spans;
  uint64_t collectives; /* allreduce .. barrier entries called */
  uint64_t mem_copy_calls;
  uint64_t ready_calls, notify_calls, done_calls, interrupt_calls;
  uint64_t failed_dones; /* done called with rc != PLAIT_SUCCESS */
  uint64_t collectives_run; /* collectives the worker finished successfully */
} devsim_counters_t;

typedef struct devsim_api {
  void *(*alloc)(size_t bytes);   /* device memory (disguised), NULL on failure */
  void (*free)(void *dptr);
  int (*to_device)(void *dptr, const void *src, size_t bytes); /* 0 or -1 */
  int (*to_host)(void *dst, const void *dptr, size_t bytes);   /* 0 or -1 */
  long (*live_allocations)(void);
  void *(*stream_create)(void);
  void (*stream_destroy)(void *stream);
  void *(*default_stream)(void);
  /* Writes a copy of src[0..bytes) (taken now) to dptr after delay_ms, in
   * order after everything enqueued on stream before. 0 or -1. */
  int (*stream_enqueue_write)(void *stream, void *dptr, const void *src, size_t bytes,
                              int delay_ms);
  void (*stream_synchronize)(void *stream);
  long (*ready_calls)(void *stream); /* NULL: the default stream */
  void (*gate)(int closed); /* 1: completions (done callbacks) are held */
  void (*counters)(devsim_counters_t *out);
  void (*counters_reset)(void);
  /* The last `cap` batch_copy records, oldest first; returns how many. */
  size_t (*batch_history)(devsim_batch_record_t *out, size_t cap);
  /* rc of the last interrupt (0: none), its message into why. */
  int (*last_interrupt)(char *why, size_t len);
} devsim_api_t;

#ifdef DEVSIM_API_LOADER
#include <dlfcn.h>
#include <stdio.h>
/* Loads the plugin file at path (the one the core loads: same path) and
 * fills api; 0, or -1 with why in err. */
static inline int devsim_api_load(const char *path, devsim_api_t *api, char *err, size_t len) {
  void *so = dlopen(path, RTLD_NOW);
  if (!so) {
    snprintf(err, len, "%s", dlerror());
    return -1;
  }
#define DEVSIM_SYM_(field, name)                                               \
  do {                                                                         \
    *(void **)&api->field = dlsym(so, name);                                   \
    if (!api->field) {                                                         \
      snprintf(err, len, "%s: no %s", path, name);                             \
      return -1;                                                               \
    }                                                                          \
  } while (0)
  DEVSIM_SYM_(alloc, "devsim_alloc");
  DEVSIM_SYM_(free, "devsim_free");
  DEVSIM_SYM_(to_device, "devsim_to_device");
  DEVSIM_SYM_(to_host, "devsim_to_host");
  DEVSIM_SYM_(live_allocations, "devsim_live_allocations");
  DEVSIM_SYM_(stream_create, "devsim_stream_create");
  DEVSIM_SYM_(stream_destroy, "devsim_stream_destroy");
  DEVSIM_SYM_(default_stream, "devsim_default_stream");
  DEVSIM_SYM_(stream_enqueue_write, "devsim_stream_enqueue_write");
  DEVSIM_SYM_(stream_synchronize, "devsim_stream_synchronize");
  DEVSIM_SYM_(ready_calls, "devsim_ready_calls");
  DEVSIM_SYM_(gate, "devsim_gate");
  DEVSIM_SYM_(counters, "devsim_counters");
  DEVSIM_SYM_(counters_reset, "devsim_counters_reset");
  DEVSIM_SYM_(batch_history, "devsim_batch_history");
  DEVSIM_SYM_(last_interrupt, "devsim_last_interrupt");
#undef DEVSIM_SYM_
  return 0;
}
#endif

#endif
