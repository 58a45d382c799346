/*
 * Internal to engine/negotiate/: what negotiate.c asks of records.c beyond
 * negotiate.h (the ready list, tombstones). Nothing outside engine/negotiate/
 * includes it.
 */
#ifndef PLAIT_NEGOTIATE_INTERNAL_H
#define PLAIT_NEGOTIATE_INTERNAL_H

#include <stdint.h>

#include "engine/negotiate/negotiate.h"

/* Appends rec (agreed, or failed) to the ready list; its members moved. */
plait_result_t plait_neg_push_ready(plait_negotiator_t *n, plait_record_t *rec);
/* rec is failing before every rank announced it: remember who had not. */
void plait_neg_bury(plait_negotiator_t *n, const plait_record_t *rec);
/* 1 when rank's announcement of name was sent before it ran the list that
 * failed name (so that list already failed it there): drop it. */
int plait_neg_stale(plait_negotiator_t *n, int rank, const char *name, uint64_t acked);
/* Frees a tombstone (a plait_namemap_each callback of n->tombstones). */
void plait_neg_free_tomb_cb(const char *key, void *value, void *arg);

/* negotiate.c: the pending record of key (name in pset), made when there
 * is none (n->lookups counts the calls); NULL, the error set, when out of
 * memory. */
plait_record_t *plait_neg_record(plait_negotiator_t *n, const char *key, const char *name,
                                 int32_t pset);
/* negotiate.c: after rec gained announcements: complete it when every member
 * is present, or settle it against joined ranks. */
plait_result_t plait_neg_settle(plait_negotiator_t *n, plait_record_t *rec);

#endif
