/*
 * Internal: PLAIT_TRANSPORT=auto. Every rank finds which transports it can
 * start (the plugin loads; its probe, given the job's layout, finds what it
 * would use), the findings are exchanged through the bootstrap, and the same
 * function of them chooses on every rank: the first candidate, in the order
 * the plugins declare (their auto_place trait), that every rank can start
 * with the same detail (ofi: the same provider). So ranks never split
 * between transports. The candidates are the plugins found in the search
 * path that declare a place, on any rank: the core names none.
 */
#ifndef PLAIT_TRANSPORT_CHOICE_H
#define PLAIT_TRANSPORT_CHOICE_H

#include <stddef.h>
#include <stdint.h>

#include "control/bootstrap.h"
#include "engine/transport/plugin.h"

#define PLAIT_CHOICE_MAX 8      /* candidates */
#define PLAIT_CHOICE_NAME 64    /* bytes of a candidate's name, with its NUL */
#define PLAIT_CHOICE_DETAIL 252 /* bytes of a finding's text, with its NUL */

/* One rank's finding about one candidate. */
typedef struct plait_choice_fact {
  int32_t code;                     /* PLAIT_SUCCESS: it can start here; else why not */
  char detail[PLAIT_CHOICE_DETAIL]; /* what it would use ("shm"), or why not */
} plait_choice_fact_t;

/* A plugin this rank found that asks to be a candidate (its auto_place). */
typedef struct plait_choice_offer {
  char name[PLAIT_CHOICE_NAME];
  int32_t place;
} plait_choice_offer_t;

/* This rank's offers: every plugin in the search path (plugin.h's
 * folders) that loads and declares auto_place > 0, lowest place first (then
 * by name); returns how many (at most cap). */
int plait_choice_offers(const char *search_path, plait_choice_offer_t *out, int cap);

/* Pure, and so the same on every rank: the candidates, from every rank's
 * offers (offers[r * PLAIT_CHOICE_MAX + i], a rank's list ended by an empty
 * name): each name once (a name offered at several places takes the
 * lowest), lowest place first, then by name. Returns how many (<= cap). */
int plait_choice_candidates(const plait_choice_offer_t *offers, int nranks,
                            plait_choice_offer_t *out, int cap);

/* Pure, and so the same on every rank: facts[r * ncand + c] is rank r's
 * finding about candidate c. Returns the index of the chosen candidate, or -1
 * when none serves every rank. why receives the reason, for the log or the
 * error: "ofi (shm; all 4 ranks on one host)", or "gloo (ofi not used: rank
 * 1: ...)"; layout describes the hosts ("all 4 ranks on one host"). */
int plait_choice_decide(const char *const *names, int ncand, const plait_choice_fact_t *facts,
                        int nranks, const char *layout, char *why, size_t why_len);

/* Collective over the bootstrap (every rank calls it at start): probes every
 * candidate with args (the init arguments the chosen one will get), exchanges
 * the findings, chooses, and leaves the chosen plugin loaded (not started) in
 * *p. Logs the choice once (rank 0, info level). PLAIT_ERR_PLUGIN listing
 * every candidate's reason when none serves every rank. */
plait_result_t plait_transport_auto(plait_boot_t *boot, const plait_transport_init_args_t *args,
                                    const char *search_path, plait_plugin_t *p);

#endif
