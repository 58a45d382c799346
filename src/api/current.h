/*
 * Internal (api layer): the one place the public API gets its engine from.
 *
 * The process's engine is the one plait_init created. A thread bound to an
 * engine (engine.h: its coordinator thread, or a rank's thread in the
 * in-process tests) works on that one instead. Each public call holds a
 * reference for as long as it runs, so plait_shutdown on another thread
 * never frees an engine under it.
 */
#ifndef PLAIT_API_CURRENT_H
#define PLAIT_API_CURRENT_H

#include "engine/engine.h"

/* The calling thread's engine with a reference taken, or NULL. Any thread. */
plait_engine_t *plait_api_acquire(void);
/* Drops what plait_api_acquire took (*e may be NULL). */
void plait_api_release(plait_engine_t **e);

/* Declares e, the calling thread's engine, released when e leaves scope. */
#define PLAIT_API_ENGINE(e)                                                    \
  plait_engine_t *e __attribute__((cleanup(plait_api_release))) = plait_api_acquire()

/* A public call's out-pointer p must not be NULL: else it returns
 * PLAIT_ERR_INVALID_ARGUMENT naming the call and p (util/error.h). */
#define REQUIRE_OUT(p)                                                         \
  do {                                                                         \
    if (!(p))                                                                  \
      return plait_error(PLAIT_ERR_INVALID_ARGUMENT, "%s: " #p " is NULL",     \
                         __func__);                                            \
  } while (0)

/* PLAIT_SUCCESS when e runs in this process; else PLAIT_ERR_NOT_INITIALIZED
 * naming fn, and saying so when this process is a fork of e's. */
plait_result_t plait_api_check(const char *fn, const plait_engine_t *e);

/* plait_init and plait_shutdown only (under their lock): makes e the
 * process's engine (taking over its reference), and takes it back. */
void plait_api_publish(plait_engine_t *e);
plait_engine_t *plait_api_unpublish(void);
/* 1 when e is the process's engine (the one plait_init made). */
int plait_api_is_process_engine(const plait_engine_t *e);

#endif
