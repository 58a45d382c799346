#include "linebuf.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#include "util/eintr.h"

void plaitrun_linebuf_init(plaitrun_linebuf_t *lb, int out_fd, int rank, int prefix_enabled) {
  memset(lb, 0, sizeof *lb);
  lb->out_fd = out_fd;
  lb->prefix_enabled = prefix_enabled;
  int n = snprintf(lb->prefix, sizeof lb->prefix, "[%d]: ", rank);
  lb->prefix_len = n > 0 ? (size_t)n : 0;
}

void plaitrun_linebuf_set_label(plaitrun_linebuf_t *lb, const char *label) {
  int n = snprintf(lb->prefix, sizeof lb->prefix, "[%.*s]: ", PLAITRUN_LINE_PREFIX_MAX - 8, label);
  lb->prefix_len = n > 0 ? (size_t)n : 0;
}

void plaitrun_linebuf_free(plaitrun_linebuf_t *lb) {
  free(lb->pending);
  lb->pending = NULL;
  lb->len = lb->cap = 0;
}

/* writev() all of iov, retrying on EINTR, EAGAIN and short writes. */
static void write_all(plaitrun_linebuf_t *lb, struct iovec *iov, int count) {
  while (count > 0 && !lb->write_failed) {
    ssize_t w;
    PLAIT_RETRY_EINTR(w, writev(lb->out_fd, iov, count));
    if (w < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK) { /* inherited O_NONBLOCK */
        struct pollfd pfd = {.fd = lb->out_fd, .events = POLLOUT};
        if (poll(&pfd, 1, -1) >= 0 || errno == EINTR) continue;
      }
      lb->write_failed = 1;
      return;
    }
    size_t done = (size_t)w;
    while (count > 0 && done >= iov->iov_len) {
      done -= iov->iov_len;
      iov++;
      count--;
    }
    if (count > 0) {
      iov->iov_base = (char *)iov->iov_base + done;
      iov->iov_len -= done;
    }
  }
}

/* Writes prefix + pending + tail + "\n" and empties pending. */
static void emit_line(plaitrun_linebuf_t *lb, const char *tail, size_t tail_len) {
  struct iovec iov[4];
  int count = 0;
  iov[count++] = (struct iovec){lb->prefix, lb->prefix_len};
  if (lb->len > 0) iov[count++] = (struct iovec){lb->pending, lb->len};
  if (tail_len > 0) iov[count++] = (struct iovec){(char *)tail, tail_len};
  iov[count++] = (struct iovec){(char *)"\n", 1};
  write_all(lb, iov, count);
  lb->len = 0;
}

/* Appends to pending (n <= PLAITRUN_LINE_MAX - len). */
static void append_pending(plaitrun_linebuf_t *lb, const char *data, size_t n) {
  if (lb->len + n > lb->cap) {
    size_t cap = lb->cap ? lb->cap : 256;
    while (cap < lb->len + n) cap *= 2;
    if (cap > PLAITRUN_LINE_MAX) cap = PLAITRUN_LINE_MAX;
    char *grown = realloc(lb->pending, cap);
    if (grown == NULL) { /* out of memory: write what we have as a piece */
      emit_line(lb, data, n);
      return;
    }
    lb->pending = grown;
    lb->cap = cap;
  }
  memcpy(lb->pending + lb->len, data, n);
  lb->len += n;
}

void plaitrun_linebuf_feed(plaitrun_linebuf_t *lb, const char *data, size_t n) {
  if (!lb->prefix_enabled) {
    struct iovec iov = {(char *)data, n};
    if (n > 0) write_all(lb, &iov, 1);
    return;
  }
  while (n > 0) {
    const char *nl = memchr(data, '\n', n);
    size_t seg = nl ? (size_t)(nl - data) : n; /* bytes before the newline */
    size_t room = PLAITRUN_LINE_MAX - lb->len;
    if (seg > room) { /* too long: write a full piece and go on */
      emit_line(lb, data, room);
      data += room;
      n -= room;
    } else if (nl == NULL) {
      append_pending(lb, data, seg);
      return;
    } else {
      emit_line(lb, data, seg);
      data += seg + 1;
      n -= seg + 1;
    }
  }
}

void plaitrun_linebuf_finish(plaitrun_linebuf_t *lb) {
  if (lb->prefix_enabled && lb->len > 0) emit_line(lb, NULL, 0);
}
