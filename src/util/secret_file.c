/* The job secret from a private file: PLAIT_SECRET_FILE (a Slurm job's
 * secret made with umask 077, never in the environment of every process). */
#include "util/secret_file.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/error.h"

#define SECRET_MAX 4096

/* The checks on the open file: a regular file of this user, private. */
static plait_result_t check_private(int fd, const char *path) {
  struct stat st;
  if (fstat(fd, &st) != 0)
    return plait_error(PLAIT_ERR_CONFIG, "PLAIT_SECRET_FILE='%s': cannot stat it: %s", path,
                       strerror(errno));
  if (!S_ISREG(st.st_mode))
    return plait_error(PLAIT_ERR_CONFIG, "PLAIT_SECRET_FILE='%s' is not a regular file", path);
  if (st.st_uid != geteuid())
    return plait_error(PLAIT_ERR_CONFIG, "PLAIT_SECRET_FILE='%s' is owned by uid %u, not by this "
                       "user (uid %u): a secret file must be your own", path,
                       (unsigned)st.st_uid, (unsigned)geteuid());
  if (st.st_mode & (S_IRWXG | S_IRWXO))
    return plait_error(PLAIT_ERR_CONFIG, "PLAIT_SECRET_FILE='%s' can be used by its group or "
                       "others (mode %03o): make it private (chmod 600, or create it under "
                       "umask 077)", path, (unsigned)(st.st_mode & 0777));
  return PLAIT_SUCCESS;
}

plait_result_t plait_secret_file_read(const char *path, char **out) {
  *out = NULL;
  int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
  if (fd < 0)
    return plait_error(PLAIT_ERR_CONFIG, "PLAIT_SECRET_FILE='%s' cannot be opened: %s", path,
                       strerror(errno));
  plait_result_t rc = check_private(fd, path);
  char buf[SECRET_MAX + 1];
  size_t used = 0;
  while (rc == PLAIT_SUCCESS && used < SECRET_MAX) {
    ssize_t n = read(fd, buf + used, SECRET_MAX - used);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0)
      rc = plait_error(PLAIT_ERR_CONFIG, "PLAIT_SECRET_FILE='%s' cannot be read: %s", path,
                       strerror(errno));
    if (n <= 0) break;
    used += (size_t)n;
  }
  close(fd);
  if (rc) return rc;
  buf[used] = '\0';
  buf[strcspn(buf, "\r\n")] = '\0';
  if (!*buf)
    return plait_error(PLAIT_ERR_CONFIG, "PLAIT_SECRET_FILE='%s' is empty: its first line is "
                       "the job secret", path);
  *out = strdup(buf);
  if (!*out) return plait_error(PLAIT_ERR_NO_MEMORY, "out of memory reading PLAIT_SECRET_FILE");
  return PLAIT_SUCCESS;
}
