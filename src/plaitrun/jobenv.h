/*
 * plaitrun: the environment every rank gets.
 *
 * The variables common to all ranks are set in plaitrun's own environment
 * before the ranks are forked, so that each child inherits them together with
 * everything else the user had; each child then adds its rank.
 */
#ifndef PLAITRUN_JOBENV_H
#define PLAITRUN_JOBENV_H

#include <stddef.h>

#define PLAITRUN_SECRET_BYTES 32
#define PLAITRUN_SECRET_HEX_LEN (2 * PLAITRUN_SECRET_BYTES)
#define PLAITRUN_RENDEZVOUS_MAX 300 /* "host:port" */

/*
 * Sets PLAIT_SIZE and PLAIT_LOCAL_SIZE to nranks; PLAIT_RENDEZVOUS to
 * <rendezvous_host>:<free port> (127.0.0.1 when rendezvous_host is NULL; the
 * port is one free on this host) and PLAIT_SECRET to a fresh random secret
 * unless the user already set them (non-empty). Returns 0, or -1 with a
 * message in err.
 */
int plaitrun_jobenv_prepare(int nranks, const char *rendezvous_host, char *err, size_t err_size);

/*
 * So that `plaitrun -np N python3 train.py` finds plait's Python package and
 * the very libplait plaitrun runs with: sets PLAIT_LIBRARY to that library's
 * path unless the user set it, and prepends the package's folder to
 * PYTHONPATH: <bindir>/../PLAITRUN_PYTHON_INSTALL_DIR when installed, the
 * source tree's bindings/python when plaitrun runs from a build tree. Missing
 * folders are skipped silently (a C program needs neither). 0, or -1 with a
 * message in err.
 */
int plaitrun_jobenv_python(char *err, size_t err_size);

/* In a forked child: sets PLAIT_RANK, PLAIT_LOCAL_RANK and PLAIT_LOCAL_SIZE.
 * 0 or -1. */
int plaitrun_jobenv_set_rank(int rank, int local_rank, int local_size);

/* A TCP port on 127.0.0.1 that was free a moment ago, or -1 (errno set). */
int plaitrun_free_loopback_port(void);

/* Fills out with PLAITRUN_SECRET_HEX_LEN lowercase hex digits and a NUL, from
 * getrandom() (or /dev/urandom). Returns 0, or -1 (errno set). */
int plaitrun_make_secret(char out[PLAITRUN_SECRET_HEX_LEN + 1]);

#endif
