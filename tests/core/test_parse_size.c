/*
 * plait/parse_size.h: the one size parser of the configuration table, the
 * ofi plugin's PLAIT_OFI_* sizes, plait-bench, bench_transport and
 * bench/mpi_allreduce. Each former copy's accepted forms are accepted with
 * the value it gave; what the table refused stays refused (test_config has
 * the table's own cases); the length-bounded form reads a size inside a
 * longer text, as bench_transport's "-s MIN:MAX" needs.
 */
#include <criterion/criterion.h>
#include <stdint.h>
#include <string.h>

#include "plait/parse_size.h"

typedef struct {
  const char *text;
  uint64_t want;
} size_case_t;

static void expect_all(const char *who, const size_case_t *cases, size_t n) {
  for (size_t i = 0; i < n; i++) {
    uint64_t got = 12345;
    int rc = plait_parse_size(cases[i].text, &got);
    cr_expect_eq(rc, 0, "%s: \"%s\" refused", who, cases[i].text);
    cr_expect_eq(got, cases[i].want, "%s: \"%s\" gave %llu, expected %llu", who, cases[i].text,
                 (unsigned long long)got, (unsigned long long)cases[i].want);
  }
}
#define EXPECT_ALL(who, cases) expect_all(who, cases, sizeof cases / sizeof cases[0])

#define K(n) ((uint64_t)(n) << 10)
#define M(n) ((uint64_t)(n) << 20)
#define G(n) ((uint64_t)(n) << 30)
#define T(n) ((uint64_t)(n) << 40)

/* src/util/config.c's plait_parse_size, which this is: K M G T in either
 * case, then nothing, B or iB in either case. */
Test(parse_size, the_configuration_tables_forms) {
  static const size_case_t cases[] = {
      {"0", 0},         {"65536", 65536},  {"64K", K(64)},   {"64k", K(64)},  {"64KB", K(64)},
      {"64kb", K(64)},  {"64KiB", K(64)},  {"64kib", K(64)}, {"64KIB", K(64)}, {"64M", M(64)},
      {"64MiB", M(64)}, {"1G", G(1)},      {"1GB", G(1)},    {"1T", T(1)},    {"1tib", T(1)},
      {"007", 7},       {"18446744073709551615", UINT64_MAX}, {"16777215T", T(16777215)},
  };
  EXPECT_ALL("config", cases);
}

/* plugins/ofi/tunables.c's copy: "65536", "64K", "64M", "1G", "1T", "KB",
 * "KiB", as its error message and docs/configuration.md show them. */
Test(parse_size, the_ofi_plugins_forms) {
  static const size_case_t cases[] = {
      {"65536", 65536}, {"4K", K(4)},    {"64K", K(64)},   {"1M", M(1)},    {"64M", M(64)},
      {"1G", G(1)},     {"1T", T(1)},    {"256KB", K(256)}, {"256KiB", K(256)}, {"2mib", M(2)},
      {"2Mb", M(2)},    {"0", 0},
  };
  EXPECT_ALL("ofi", cases);
}

/* bench/plait-bench/util.c's copy (--min, --max, --thresholds, --mix
 * uniform:COUNTxSIZE and sizes:...): K M G in either case, then B, iB or
 * b. The count of a uniform mix is read as a size too ("200"). */
Test(parse_size, plait_benchs_forms) {
  static const size_case_t cases[] = {
      {"0", 0},      {"4", 4},      {"200", 200},  {"4K", K(4)},  {"64K", K(64)}, {"1M", M(1)},
      {"4M", M(4)},  {"16M", M(16)}, {"64M", M(64)}, {"256M", M(256)}, {"1G", G(1)},
      {"64KB", K(64)}, {"64Kb", K(64)}, {"64KiB", K(64)}, {"64k", K(64)}, {"64kB", K(64)},
  };
  EXPECT_ALL("plait-bench", cases);
}

/* bench/transport's copy: K M G T in either case, "-s MIN:MAX" read in
 * two parts (each as a whole). */
Test(parse_size, bench_transports_forms) {
  static const size_case_t cases[] = {
      {"64", 64}, {"4K", K(4)}, {"4k", K(4)}, {"256M", M(256)}, {"1G", G(1)}, {"1T", T(1)},
  };
  EXPECT_ALL("bench_transport", cases);
  const char *spec = "4K:256M";
  const char *colon = strchr(spec, ':');
  uint64_t lo = 0, hi = 0;
  cr_expect_eq(plait_parse_size_n(spec, (size_t)(colon - spec), &lo), 0);
  cr_expect_eq(plait_parse_size(colon + 1, &hi), 0);
  cr_expect(lo == K(4) && hi == M(256), "4K:256M gave %llu:%llu", (unsigned long long)lo,
            (unsigned long long)hi);
}

/* bench/mpi_allreduce.c's copy, as ci/bench calls it: --min 4K --max 256M
 * --factor 4, --min 64M --max 64M. */
Test(parse_size, mpi_allreduces_forms) {
  static const size_case_t cases[] = {
      {"4K", K(4)}, {"256M", M(256)}, {"4", 4}, {"64M", M(64)}, {"1G", G(1)},
  };
  EXPECT_ALL("mpi_allreduce", cases);
}

/* Refused, *out untouched: the table's refusals, and what the looser copies
 * let through by accident (bench_transport's strtoull took a sign or
 * leading space, mpi_allreduce took any tail, ofi took "64Ki"). */
Test(parse_size, refuses_what_the_table_refuses) {
  static const char *bad[] = {
      "",     "-1",   "+64",   " 64",  "64 ",  "64 K", "64Q",  "1.5M", "64MBB", "64Mi",
      "64Ki", "64B",  "64b",   "M",    "K64",  "0x40", "1e6",  "4K:",  "64Kx",  "64KiBs",
      "64\xc4\xb0" "B", /* a non-ASCII capital I (UTF-8) is no "i" */
      "18446744073709551616", "99999999999999999999", "16777216T", "17179869184G",
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    uint64_t got = 777;
    cr_expect_eq(plait_parse_size(bad[i], &got), -1, "\"%s\" accepted", bad[i]);
    cr_expect_eq(got, 777, "\"%s\" wrote %llu on failure", bad[i], (unsigned long long)got);
  }
  uint64_t got = 777;
  cr_expect_eq(plait_parse_size(NULL, &got), -1, "NULL text");
  cr_expect_eq(got, 777);
}

/* The bounded form reads exactly len bytes: not past them, not short. */
Test(parse_size, bounded_form_reads_exactly_len_bytes) {
  uint64_t got = 777;
  cr_expect_eq(plait_parse_size_n("64KiB", 0, &got), -1, "nothing to read");
  cr_expect_eq(plait_parse_size_n("64KiB", 3, &got), 0);
  cr_expect_eq(got, K(64));
  cr_expect_eq(plait_parse_size_n("64KiB", 4, &got), -1, "\"64Ki\"");
  cr_expect_eq(plait_parse_size_n("64KiB", 5, &got), 0);
  cr_expect_eq(plait_parse_size_n("64\0K", 4, &got), -1, "a NUL inside the length");
  cr_expect_eq(plait_parse_size_n("123456", 2, &got), 0);
  cr_expect_eq(got, 12, "only the first 2 digits");
}
