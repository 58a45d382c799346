/*
 * Tests of the silence watch (src/engine/health/silence.c): when a rank owes
 * a heartbeat, and which rank is lost after PLAIT_TIMEOUT_S of silence.
 * Times are moved back by hand (last_sent, last_heard), so no test sleeps.
 */
#include <criterion/criterion.h>
#include <string.h>

#include "engine/health/silence.h"
#include "util/error.h"

Test(silence, fresh_watch_owes_nothing_and_loses_nobody) {
  plait_silence_t s;
  cr_assert_eq(plait_silence_init(&s, 0, 3, 8.0), PLAIT_SUCCESS);
  cr_assert_not(plait_silence_beat_due(&s));
  cr_assert_eq(plait_silence_check(&s), PLAIT_SUCCESS);
  plait_silence_free(&s);
  cr_assert_null(s.last_heard);
}

Test(silence, a_heartbeat_is_due_after_a_quarter_of_the_timeout) {
  plait_silence_t s;
  cr_assert_eq(plait_silence_init(&s, 1, 2, 8.0), PLAIT_SUCCESS);
  s.last_sent = plait_now() - 1.9;
  cr_assert_not(plait_silence_beat_due(&s));
  s.last_sent = plait_now() - 2.1;
  cr_assert(plait_silence_beat_due(&s));
  plait_silence_sent(&s);
  cr_assert_not(plait_silence_beat_due(&s), "sending resets the clock");
  plait_silence_free(&s);
}

Test(silence, a_lone_rank_never_owes_a_heartbeat) {
  plait_silence_t s;
  cr_assert_eq(plait_silence_init(&s, 0, 1, 8.0), PLAIT_SUCCESS);
  s.last_sent = plait_now() - 100;
  cr_assert_not(plait_silence_beat_due(&s));
  cr_assert_eq(plait_silence_check(&s), PLAIT_SUCCESS);
  plait_silence_free(&s);
}

Test(silence, rank_0_names_the_silent_rank) {
  plait_silence_t s;
  cr_assert_eq(plait_silence_init(&s, 0, 3, 8.0), PLAIT_SUCCESS);
  s.last_heard[2] = plait_now() - 9;
  cr_assert_eq(plait_silence_check(&s), PLAIT_ERR_PEER_LOST);
  cr_assert(strstr(plait_last_error(), "rank 2 was lost: silent for 9."), "%s",
            plait_last_error());
  cr_assert(strstr(plait_last_error(), "(PLAIT_TIMEOUT_S=8)"), "%s", plait_last_error());
  plait_silence_heard(&s, 2, plait_now());
  cr_assert_eq(plait_silence_check(&s), PLAIT_SUCCESS, "a frame from it clears it");
  s.last_heard[1] = plait_now() - 20;
  plait_silence_all_busy(&s);
  cr_assert_eq(plait_silence_check(&s), PLAIT_SUCCESS, "after collectives nobody is silent");
  plait_silence_free(&s);
}

Test(silence, other_ranks_watch_rank_0_only) {
  plait_silence_t s;
  cr_assert_eq(plait_silence_init(&s, 2, 3, 4.0), PLAIT_SUCCESS);
  s.last_heard[1] = plait_now() - 100; /* not watched by rank 2 */
  cr_assert_eq(plait_silence_check(&s), PLAIT_SUCCESS);
  s.last_heard[0] = plait_now() - 5;
  cr_assert_eq(plait_silence_check(&s), PLAIT_ERR_PEER_LOST);
  cr_assert(strstr(plait_last_error(), "rank 0 was lost: silent for 5."), "%s",
            plait_last_error());
  plait_silence_free(&s);
}

/* A stall this rank shared (descheduled under load, or the host stopped):
 * 3 s since its last check, the peers silent as long. They are not lost: it
 * was not watching. Silence it did watch still counts, and still names them. */
Test(silence, time_this_rank_was_not_watching_is_not_the_peers_silence) {
  plait_silence_t s;
  cr_assert_eq(plait_silence_init(&s, 0, 3, 1.0), PLAIT_SUCCESS);
  double now = plait_now();
  s.last_check = now - 3;
  s.last_heard[1] = now - 3.1;
  s.last_heard[2] = now - 2.9;
  cr_assert_eq(plait_silence_check(&s), PLAIT_SUCCESS, "%s", plait_last_error());
  s.last_heard[1] = plait_now() - 1.5; /* then silent 1.5 s while it watched */
  cr_assert_eq(plait_silence_check(&s), PLAIT_ERR_PEER_LOST);
  cr_assert(strstr(plait_last_error(), "rank 1 was lost: silent for 1."), "%s",
            plait_last_error());
  plait_silence_free(&s);
}

Test(silence, a_rank_0_stall_on_another_rank_is_not_rank_0_silence) {
  plait_silence_t s;
  cr_assert_eq(plait_silence_init(&s, 1, 2, 2.0), PLAIT_SUCCESS);
  s.last_check = plait_now() - 5;
  s.last_heard[0] = plait_now() - 5;
  cr_assert_eq(plait_silence_check(&s), PLAIT_SUCCESS, "%s", plait_last_error());
  plait_silence_free(&s);
}
