/*
 * plaitrun: prefixing the ranks' output with their rank.
 *
 * One linebuf per (rank, stream). Bytes read from the rank's pipe are fed in;
 * every complete line is written to out_fd as "[rank]: line\n" with a single
 * writev, so lines of different ranks never mix. A partial line waits for its
 * newline; plaitrun_linebuf_finish() (at EOF) writes it with a newline added.
 * A line longer than PLAITRUN_LINE_MAX bytes is written in pieces of that size,
 * each prefixed and ended with a newline, so memory stays bounded.
 *
 * With prefixing off, bytes are written through unchanged as they arrive.
 * After a write error (EPIPE: the reader went away) further output of that
 * linebuf is dropped; the job itself goes on.
 */
#ifndef PLAITRUN_LINEBUF_H
#define PLAITRUN_LINEBUF_H

#include <stddef.h>

#define PLAITRUN_LINE_MAX 65536
#define PLAITRUN_LINE_PREFIX_MAX 300

typedef struct plaitrun_linebuf {
  int out_fd;
  int prefix_enabled;
  char prefix[PLAITRUN_LINE_PREFIX_MAX]; /* "[1023]: ", "[host/slot]: " */
  size_t prefix_len;
  char *pending; /* start of the current line, not yet written */
  size_t len;
  size_t cap;
  int write_failed;
} plaitrun_linebuf_t;

void plaitrun_linebuf_init(plaitrun_linebuf_t *lb, int out_fd, int rank, int prefix_enabled);
/* Lines from now on are prefixed "[label]: " (the elastic driver: a worker's
 * name before its first epoch, then its rank in each epoch). */
void plaitrun_linebuf_set_label(plaitrun_linebuf_t *lb, const char *label);
void plaitrun_linebuf_feed(plaitrun_linebuf_t *lb, const char *data, size_t n);
/* Writes a pending partial line (adding '\n'). */
void plaitrun_linebuf_finish(plaitrun_linebuf_t *lb);
/* Frees the buffer; does not write. */
void plaitrun_linebuf_free(plaitrun_linebuf_t *lb);

#endif
