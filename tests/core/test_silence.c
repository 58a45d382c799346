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
