/*
 * plaitrun's elastic driver, its pure parts: the discovery script's output,
 * host order and blacklist, rank assignment (src/plaitrun/elastic/).
 */
#include <criterion/criterion.h>

#include <string.h>

#include "plaitrun/elastic/assign.h"
#include "plaitrun/elastic/discovery.h"
#include "plaitrun/elastic/hosts.h"

static plaitrun_hostlist_t list;
static char err[512];

/* ---- discovery output ---- */

Test(elastic_discovery, host_and_slots_lines) {
  cr_assert_eq(plaitrun_discovery_parse("h1:2\n  h2:4  \n10.0.0.3:1\n", 1, &list, err,
                                        sizeof err), 0, "%s", err);
  cr_assert_eq(list.n, 3);
  cr_expect_str_eq(list.hosts[0].name, "h1");
  cr_expect_eq(list.hosts[0].slots, 2);
  cr_expect_str_eq(list.hosts[1].name, "h2");
  cr_expect_eq(list.hosts[1].slots, 4);
  cr_expect_str_eq(list.hosts[2].name, "10.0.0.3");
  cr_expect_eq(list.hosts[2].slots, 1);
}

Test(elastic_discovery, lines_without_slots_get_the_default) {
  cr_assert_eq(plaitrun_discovery_parse("h1\nh2:3\r\n# a comment\n\n::1\n[fe80::1]:2\n", 5,
                                        &list, err, sizeof err), 0, "%s", err);
  cr_assert_eq(list.n, 4);
  cr_expect_eq(list.hosts[0].slots, 5);
  cr_expect_eq(list.hosts[1].slots, 3);
  cr_expect_str_eq(list.hosts[2].name, "::1");
  cr_expect_eq(list.hosts[2].slots, 5);
  cr_expect_str_eq(list.hosts[3].name, "[fe80::1]");
  cr_expect_eq(list.hosts[3].slots, 2);
}

Test(elastic_discovery, empty_output_is_no_host) {
  list.n = 7;
  cr_assert_eq(plaitrun_discovery_parse("", 1, &list, err, sizeof err), 0);
  cr_expect_eq(list.n, 0);
  cr_assert_eq(plaitrun_discovery_parse("\n  \n", 1, &list, err, sizeof err), 0);
  cr_expect_eq(list.n, 0);
}

Test(elastic_discovery, garbage_is_refused_naming_the_line) {
  static const struct {
    const char *text, *message;
  } cases[] = {
      {"h1:2\nh2:x\n", "line 2 'h2:x': the slots 'x'"},
      {"h1:0\n", "line 1 'h1:0': the slots '0'"},
      {"h1:-1\n", "the slots '-1'"},
      {"h1:2000\n", "the slots '2000'"},
      {"h1:\n", "the slots ''"},
      {"a host\n", "line 1 'a host': not a host name"},
      {"-oProxyCommand=x\n", "not a host name"},
      {"h;rm -rf /:2\n", "not a host name"},
      {":3\n", "line 1 ':3': not a host name"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    err[0] = '\0';
    cr_expect_eq(plaitrun_discovery_parse(cases[i].text, 1, &list, err, sizeof err), -1,
                 "case %zu", i);
    cr_expect_not_null(strstr(err, cases[i].message), "case %zu: %s", i, err);
  }
}

Test(elastic_discovery, duplicate_host) {
  cr_assert_eq(plaitrun_discovery_parse("h1:2\nh2\nh1:2\n", 1, &list, err, sizeof err), 0);
  cr_expect_eq(list.n, 2, "the same line twice counts once");
  cr_expect_eq(plaitrun_discovery_parse("h1:2\nh1:3\n", 1, &list, err, sizeof err), -1);
  cr_expect_not_null(strstr(err, "host 'h1' is listed twice with different slots (2 and 3)"),
                     "%s", err);
}

/* ---- hosts: order and blacklist ---- */

static plaitrun_hosts_t hosts;

static void found(const char *text) {
  cr_assert_eq(plaitrun_discovery_parse(text, 1, &list, err, sizeof err), 0, "%s", err);
}

static void expect_order(int with_blacklisted, const char *const *names, int n) {
  int idx[PLAITRUN_HOSTS_TABLE_MAX];
  int got = plaitrun_hosts_ordered(&hosts, with_blacklisted, idx, PLAITRUN_HOSTS_TABLE_MAX);
  cr_assert_eq(got, n, "%d hosts in order, expected %d", got, n);
  for (int k = 0; k < n; k++)
    cr_expect_str_eq(hosts.hosts[idx[k]].name, names[k], "place %d", k);
}

Test(elastic_hosts, order_is_first_discovery_and_survives_reordered_lists) {
  plaitrun_hosts_init(&hosts, 0, 0);
  found("b:2\na:2\n");
  cr_expect_eq(plaitrun_hosts_update(&hosts, &list, 0), PLAITRUN_HOSTS_ADDED);
  found("c:1\na:2\nb:2\n");
  cr_expect_eq(plaitrun_hosts_update(&hosts, &list, 1), PLAITRUN_HOSTS_ADDED);
  expect_order(0, (const char *[]){"b", "a", "c"}, 3);
  found("c:1\na:2\nb:2\n");
  cr_expect_eq(plaitrun_hosts_update(&hosts, &list, 2), 0, "nothing changed");
  cr_expect_eq(hosts.n_changes, 0);
  cr_expect_eq(plaitrun_hosts_usable_slots(&hosts), 5);
}

Test(elastic_hosts, removed_host_and_slot_changes) {
  plaitrun_hosts_init(&hosts, 0, 0);
  found("a:2\nb:2\nc:2\n");
  plaitrun_hosts_update(&hosts, &list, 0);
  found("a:2\nc:2\n");
  cr_expect_eq(plaitrun_hosts_update(&hosts, &list, 1), PLAITRUN_HOSTS_REMOVED);
  cr_assert_eq(hosts.n_changes, 1);
  cr_expect_eq(hosts.changes[0].kind, PLAITRUN_HOST_GONE);
  expect_order(0, (const char *[]){"a", "c"}, 2);
  found("a:1\nc:3\n");
  cr_expect_eq(plaitrun_hosts_update(&hosts, &list, 2),
               PLAITRUN_HOSTS_ADDED | PLAITRUN_HOSTS_REMOVED);
  found("a:1\nc:3\nb:2\n");
  cr_expect_eq(plaitrun_hosts_update(&hosts, &list, 3), PLAITRUN_HOSTS_ADDED);
  expect_order(0, (const char *[]){"a", "c", "b"}, 3); /* b came back: last */
}

Test(elastic_hosts, blacklist_without_range_is_for_good) {
  plaitrun_hosts_init(&hosts, 0, 0);
  found("a:2\nb:2\n");
  plaitrun_hosts_update(&hosts, &list, 0);
  int a = plaitrun_hosts_find(&hosts, "a");
  cr_expect_eq(plaitrun_hosts_blacklist(&hosts, a, 10, 0.5), -1);
  cr_expect_not(plaitrun_hosts_usable(&hosts, a));
  cr_expect_eq(plaitrun_hosts_usable_slots(&hosts), 2);
  plaitrun_hosts_update(&hosts, &list, 1e9);
  cr_expect_not(plaitrun_hosts_usable(&hosts, a), "no cooldown: never back");
  expect_order(0, (const char *[]){"b"}, 1);
  expect_order(1, (const char *[]){"a", "b"}, 2);
}

Test(elastic_hosts, cooldown_is_horovods_exponential_back_off_inside_the_range) {
  cr_expect_float_eq(plaitrun_cooldown_s(10, 100, 1, 0.0), 20.0, 1e-9);
  cr_expect_float_eq(plaitrun_cooldown_s(10, 100, 1, 0.5), 25.0, 1e-9);
  cr_expect_float_eq(plaitrun_cooldown_s(10, 100, 2, 0.0), 40.0, 1e-9);
  cr_expect_float_eq(plaitrun_cooldown_s(10, 100, 3, 0.9), 89.0, 1e-9);
  cr_expect_float_eq(plaitrun_cooldown_s(10, 100, 4, 0.0), 100.0, 1e-9);
  cr_expect_float_eq(plaitrun_cooldown_s(10, 100, 60, 0.0), 100.0, 1e-9);
  cr_expect_float_eq(plaitrun_cooldown_s(5, 5, 1, 0.0), 5.0, 1e-9);
}

Test(elastic_hosts, blacklisted_host_comes_back_after_its_cooldown) {
  plaitrun_hosts_init(&hosts, 10, 100);
  found("a:2\nb:2\n");
  plaitrun_hosts_update(&hosts, &list, 0);
  int a = plaitrun_hosts_find(&hosts, "a");
  cr_expect_float_eq(plaitrun_hosts_blacklist(&hosts, a, 100, 0.0), 20.0, 1e-9);
  /* a second failure while cooling down starts no new period */
  cr_expect_float_eq(plaitrun_hosts_blacklist(&hosts, a, 105, 0.0), 15.0, 1e-9);
  cr_expect_eq(plaitrun_hosts_update(&hosts, &list, 119), 0);
  cr_expect_not(plaitrun_hosts_usable(&hosts, a));
  cr_expect_eq(plaitrun_hosts_update(&hosts, &list, 120), PLAITRUN_HOSTS_ADDED);
  cr_assert_eq(hosts.n_changes, 1);
  cr_expect_eq(hosts.changes[0].kind, PLAITRUN_HOST_BACK);
  cr_expect(plaitrun_hosts_usable(&hosts, a));
  expect_order(0, (const char *[]){"a", "b"}, 2); /* it keeps its place */
  /* the next blacklisting backs off longer */
  cr_expect_float_eq(plaitrun_hosts_blacklist(&hosts, a, 200, 0.0), 40.0, 1e-9);
}

/* ---- assignment ---- */

static plaitrun_place_t place[16];

static void expect_place(int i, int rank, int size, int lr, int ls, int cr, int cs) {
  plaitrun_place_t p = place[i];
  cr_expect(p.rank == rank && p.size == size && p.local_rank == lr && p.local_size == ls &&
                p.cross_rank == cr && p.cross_size == cs,
            "seat %d: rank %d size %d local %d/%d cross %d/%d; expected %d %d %d/%d %d/%d", i,
            p.rank, p.size, p.local_rank, p.local_size, p.cross_rank, p.cross_size, rank, size,
            lr, ls, cr, cs);
}

Test(elastic_assign, ranks_host_by_host_slot_by_slot) {
  /* given out of order: host 1 slot 1, host 0 slot 0, host 1 slot 0, host 0 slot 1 */
  plaitrun_seat_t seats[] = {{1, 1}, {0, 0}, {1, 0}, {0, 1}};
  cr_assert_eq(plaitrun_assign(seats, 4, 0, place), 4);
  expect_place(1, 0, 4, 0, 2, 0, 2);
  expect_place(3, 1, 4, 1, 2, 0, 2);
  expect_place(2, 2, 4, 0, 2, 1, 2);
  expect_place(0, 3, 4, 1, 2, 1, 2);
}

Test(elastic_assign, local_and_cross_with_uneven_hosts_and_a_gap) {
  /* host 0 has slots 0 and 2 (slot 1 died), host 1 one worker, host 2 three */
  plaitrun_seat_t seats[] = {{0, 0}, {0, 2}, {1, 0}, {2, 0}, {2, 1}, {2, 2}};
  cr_assert_eq(plaitrun_assign(seats, 6, 0, place), 6);
  expect_place(0, 0, 6, 0, 2, 0, 3);
  expect_place(1, 1, 6, 1, 2, 0, 2); /* local rank 1 although slot 2 */
  expect_place(2, 2, 6, 0, 1, 1, 3);
  expect_place(3, 3, 6, 0, 3, 2, 3);
  expect_place(4, 4, 6, 1, 3, 1, 2);
  expect_place(5, 5, 6, 2, 3, 0, 1);
}

Test(elastic_assign, size_is_capped_at_max_np) {
  plaitrun_seat_t seats[] = {{1, 0}, {0, 0}, {0, 1}, {1, 1}, {2, 0}};
  cr_assert_eq(plaitrun_assign(seats, 5, 3, place), 3);
  expect_place(1, 0, 3, 0, 2, 0, 2);
  expect_place(2, 1, 3, 1, 2, 0, 1);
  expect_place(0, 2, 3, 0, 1, 1, 2);
  cr_expect_eq(place[3].rank, -1, "above --max-np: no place");
  cr_expect_eq(place[4].rank, -1);
  cr_expect_eq(plaitrun_assign(seats, 0, 3, place), 0);
}

Test(elastic_assign, oldest_hosts_keep_the_lowest_ranks_after_a_middle_host_leaves) {
  plaitrun_hosts_init(&hosts, 0, 0);
  found("a:2\nb:2\nc:2\n");
  plaitrun_hosts_update(&hosts, &list, 0);
  found("c:2\na:2\nd:2\n"); /* b removed, d added, listed in another order */
  plaitrun_hosts_update(&hosts, &list, 1);
  int idx[PLAITRUN_HOSTS_TABLE_MAX];
  int n = plaitrun_hosts_ordered(&hosts, 0, idx, PLAITRUN_HOSTS_TABLE_MAX);
  cr_assert_eq(n, 3);
  plaitrun_seat_t seats[6];
  const char *names[6];
  int k = 0;
  for (int order = n - 1; order >= 0; order--) /* candidates given newest first */
    for (int slot = 0; slot < 2; slot++, k++) {
      seats[k] = (plaitrun_seat_t){order, slot};
      names[k] = hosts.hosts[idx[order]].name;
    }
  cr_assert_eq(plaitrun_assign(seats, 6, 0, place), 6);
  static const char *by_rank[6] = {"a", "a", "c", "c", "d", "d"};
  for (int i = 0; i < 6; i++)
    cr_expect_str_eq(names[i], by_rank[place[i].rank], "rank %d is on %s", place[i].rank,
                     names[i]);
}
