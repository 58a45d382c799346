#include "jobenv.h"

#include <plait/plait.h>

#include <dlfcn.h>
#include <limits.h>

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <unistd.h>

#include "util/eintr.h"

/* Binds a loopback socket to port (0: the kernel's choice) and returns the
 * port it got, or -1. */
static int try_loopback_port(int port) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  struct sockaddr_in addr;
  memset(&addr, 0, sizeof addr);
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons((uint16_t)port);
  socklen_t len = sizeof addr;
  int got = -1;
  if (bind(fd, (struct sockaddr *)&addr, sizeof addr) == 0 &&
      getsockname(fd, (struct sockaddr *)&addr, &len) == 0)
    got = ntohs(addr.sin_port);
  int saved = errno;
  close(fd);
  errno = saved;
  return got;
}

/* The first port of the kernel's ephemeral range (where outgoing
 * connections take their local ports), 32768 when unknown. */
static int ephemeral_low(void) {
  int lo = 32768, hi = 0;
  FILE *f = fopen("/proc/sys/net/ipv4/ip_local_port_range", "r");
  if (f) {
    if (fscanf(f, "%d %d", &lo, &hi) != 2) lo = 32768;
    fclose(f);
  }
  return lo;
}

/* The port is free now, but rank 0 binds it only later: a port from the
 * ephemeral range could meanwhile become the local port of any outgoing
 * connection on the machine (seen under load: "Address already in use").
 * So a random free port below that range is taken when one is found. */
int plaitrun_free_loopback_port(void) {
  int lo = ephemeral_low();
  const int first = 10000;
  if (lo - first > 1000) {
    for (int attempt = 0; attempt < 64; attempt++) {
      unsigned r = 0;
      if (getrandom(&r, sizeof r, 0) != (ssize_t)sizeof r) break;
      int port = try_loopback_port(first + (int)(r % (unsigned)(lo - first)));
      if (port > 0) return port;
    }
  }
  return try_loopback_port(0);
}

static int read_urandom(unsigned char *buf, size_t n) {
  int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  size_t got = 0;
  while (got < n) {
    ssize_t r;
    PLAIT_RETRY_EINTR(r, read(fd, buf + got, n - got));
    if (r <= 0) {
      close(fd);
      if (r == 0) errno = EIO;
      return -1;
    }
    got += (size_t)r;
  }
  close(fd);
  return 0;
}

static int random_bytes(unsigned char *buf, size_t n) {
  size_t got = 0;
  while (got < n) {
    ssize_t r;
    PLAIT_RETRY_EINTR(r, getrandom(buf + got, n - got, 0));
    if (r < 0) return read_urandom(buf, n); /* e.g. ENOSYS in old sandboxes */
    got += (size_t)r;
  }
  return 0;
}

int plaitrun_make_secret(char out[PLAITRUN_SECRET_HEX_LEN + 1]) {
  static const char hex[] = "0123456789abcdef";
  unsigned char raw[PLAITRUN_SECRET_BYTES];
  if (random_bytes(raw, sizeof raw) != 0) return -1;
  for (size_t i = 0; i < sizeof raw; i++) {
    out[2 * i] = hex[raw[i] >> 4];
    out[2 * i + 1] = hex[raw[i] & 0xf];
  }
  out[PLAITRUN_SECRET_HEX_LEN] = '\0';
  memset(raw, 0, sizeof raw);
  return 0;
}

static int user_has(const char *name) {
  const char *v = getenv(name);
  return v != NULL && v[0] != '\0';
}

int plaitrun_jobenv_prepare(int nranks, const char *rendezvous_host, char *err,
                            size_t err_size) {
  char text[PLAITRUN_RENDEZVOUS_MAX];
  snprintf(text, sizeof text, "%d", nranks);
  if (setenv("PLAIT_SIZE", text, 1) != 0 || setenv("PLAIT_LOCAL_SIZE", text, 1) != 0)
    goto setenv_failed;
  if (!user_has("PLAIT_RENDEZVOUS")) {
    int port = plaitrun_free_loopback_port();
    if (port < 0) {
      snprintf(err, err_size, "cannot find a free TCP port on 127.0.0.1 for "
               "PLAIT_RENDEZVOUS: %s", strerror(errno));
      return -1;
    }
    snprintf(text, sizeof text, "%s:%d", rendezvous_host ? rendezvous_host : "127.0.0.1", port);
    if (setenv("PLAIT_RENDEZVOUS", text, 1) != 0) goto setenv_failed;
  }
  if (!user_has("PLAIT_SECRET")) {
    char secret[PLAITRUN_SECRET_HEX_LEN + 1];
    if (plaitrun_make_secret(secret) != 0) {
      snprintf(err, err_size, "cannot make PLAIT_SECRET: no random bytes from "
               "getrandom() or /dev/urandom: %s", strerror(errno));
      return -1;
    }
    int rc = setenv("PLAIT_SECRET", secret, 1);
    memset(secret, 0, sizeof secret);
    if (rc != 0) goto setenv_failed;
  }
  return 0;

setenv_failed:
  snprintf(err, err_size, "cannot set the ranks' environment: %s", strerror(errno));
  return -1;
}

int plaitrun_jobenv_set_rank(int rank, int local_rank, int local_size) {
  char text[32];
  snprintf(text, sizeof text, "%d", rank);
  if (setenv("PLAIT_RANK", text, 1) != 0) return -1;
  snprintf(text, sizeof text, "%d", local_rank);
  if (setenv("PLAIT_LOCAL_RANK", text, 1) != 0) return -1;
  snprintf(text, sizeof text, "%d", local_size);
  if (setenv("PLAIT_LOCAL_SIZE", text, 1) != 0) return -1;
  return 0;
}

/* Folder of a file path, in place ("/a/b/c" -> "/a/b"). */
static void strip_last(char *path) {
  char *slash = strrchr(path, '/');
  if (slash != NULL) *slash = '\0';
}

static int has_package(const char *dir) {
  char probe[PATH_MAX + 64];
  int n = snprintf(probe, sizeof probe, "%s/plait/__init__.py", dir);
  return n > 0 && (size_t)n < sizeof probe && access(probe, R_OK) == 0;
}

static int prepend_pythonpath(const char *dir) {
  const char *old = getenv("PYTHONPATH");
  if (old == NULL || old[0] == '\0') return setenv("PYTHONPATH", dir, 1);
  size_t len = strlen(dir) + 1 + strlen(old) + 1;
  char *joined = malloc(len);
  if (joined == NULL) return -1;
  snprintf(joined, len, "%s:%s", dir, old);
  int rc = setenv("PYTHONPATH", joined, 1);
  free(joined);
  return rc;
}

int plaitrun_jobenv_python(char *err, size_t err_size) {
  Dl_info info;
  if (!user_has("PLAIT_LIBRARY") && dladdr((void *)plait_version, &info) != 0 &&
      info.dli_fname != NULL) {
    char lib[PATH_MAX];
    if (realpath(info.dli_fname, lib) != NULL && setenv("PLAIT_LIBRARY", lib, 1) != 0)
      goto setenv_failed;
  }
  char exe[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (n <= 0) return 0;
  exe[n] = '\0';
  strip_last(exe); /* <bindir> */
  char dir[PATH_MAX + 64];
  const char *found = NULL;
  char real[PATH_MAX];
  int len = snprintf(dir, sizeof dir, "%s/../%s", exe, PLAITRUN_PYTHON_INSTALL_DIR);
  if (len > 0 && (size_t)len < sizeof dir && has_package(dir) && realpath(dir, real) != NULL) {
    found = real;
  } else {
    /* A build tree: <build>/bin/plaitrun beside <build>/CMakeCache.txt. */
    len = snprintf(dir, sizeof dir, "%s/../CMakeCache.txt", exe);
    if (len > 0 && (size_t)len < sizeof dir && access(dir, R_OK) == 0 &&
        has_package(PLAITRUN_SOURCE_PYTHON_DIR))
      found = PLAITRUN_SOURCE_PYTHON_DIR;
  }
  if (found != NULL && prepend_pythonpath(found) != 0) goto setenv_failed;
  return 0;

setenv_failed:
  snprintf(err, err_size, "cannot set the ranks' environment: %s", strerror(errno));
  return -1;
}
