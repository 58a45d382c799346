/* The PLAIT_AUTOTUNE_LOG CSV as the autotune tests read it (columns:
 * docs/configuration.md, "Autotuning"). Header-only. */
#ifndef PLAIT_TEST_AUTOTUNE_CSV_H
#define PLAIT_TEST_AUTOTUNE_CSV_H

#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

typedef struct {
  unsigned long long n, thr, mt, steps, lists, tensors, bytes; /* sample, sizes, counts */
  double cyc, secs, score;                                     /* ms, seconds, bytes/s */
  char phase[16];
} at_row_t;

/* Reads one data row into r; returns how many fields it read (11: all). */
static inline int at_row_parse(const char *line, at_row_t *r) {
  return sscanf(line, "%llu,%15[a-z],%llu,%llu,%lf,%llu,%llu,%llu,%llu,%lf,%lf", &r->n,
                r->phase, &r->thr, &r->mt, &r->cyc, &r->steps, &r->lists, &r->tensors,
                &r->bytes, &r->secs, &r->score);
}

/* Makes an empty file from the mkstemp template in path (for the log to
 * write); 0, or -1 when it cannot. */
static inline int at_log_file(char *path) {
  int fd = mkstemp(path);
  if (fd < 0) return -1;
  close(fd);
  return 0;
}

#endif
