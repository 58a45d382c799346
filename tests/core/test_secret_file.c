/*
 * PLAIT_SECRET_FILE (src/util/secret_file.c): plait_config_load reads the job
 * secret from the first line of a private file when PLAIT_SECRET is unset,
 * and refuses, naming the file, one that others could read.
 */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/config.h"
#include "util/error.h"
#include "util/secret_file.h"
#include "plait/plait.h"
#include "ranks.h"

static char dir[64];

static void remove_dir(void) {
  char cmd[96];
  if (!*dir) return;
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  if (system(cmd) != 0) cr_log_warn("could not remove %s", dir);
}

TestSuite(secret_file, .init = plait_test_clear_env, .fini = remove_dir);

/* A file in a fresh folder holding text, with mode; its path. */
static const char *make_file(const char *name, const char *text, mode_t mode) {
  if (!*dir) {
    snprintf(dir, sizeof dir, "/tmp/plait-secret-XXXXXX");
    cr_assert_not_null(mkdtemp(dir));
  }
  static char path[128];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
  cr_assert_geq(fd, 0);
  cr_assert_eq(write(fd, text, strlen(text)), (ssize_t)strlen(text));
  close(fd);
  cr_assert_eq(chmod(path, mode), 0);
  return path;
}

/* plait_config_load with PLAIT_SECRET_FILE=path: its result; the secret when it worked. */
static plait_result_t load(const char *path, char *secret, size_t cap) {
  setenv("PLAIT_SECRET_FILE", path, 1);
  plait_config_t cfg;
  plait_result_t rc = plait_config_load(&cfg);
  if (rc == PLAIT_SUCCESS) {
    snprintf(secret, cap, "%s", cfg.secret ? cfg.secret : "(null)");
    plait_config_free(&cfg);
  }
  return rc;
}

static void expect_refused(const char *path, const char *why) {
  char secret[64];
  plait_result_t rc = load(path, secret, sizeof secret);
  cr_assert_eq(rc, PLAIT_ERR_CONFIG, "%s was accepted", path);
  const char *msg = plait_last_error();
  cr_expect(strstr(msg, path) != NULL, "the error does not name the file: %s", msg);
  cr_expect(strstr(msg, why) != NULL, "the error does not say \"%s\": %s", why, msg);
}

Test(secret_file, the_first_line_of_a_private_file_is_the_secret) {
  char secret[64];
  const char *path = make_file("ok", "0123456789abcdef0123456789abcdef\nsecond line\n", 0600);
  cr_assert_eq(load(path, secret, sizeof secret), PLAIT_SUCCESS, "%s", plait_last_error());
  cr_expect_str_eq(secret, "0123456789abcdef0123456789abcdef");
  path = make_file("noeol", "no-line-break", 0400);
  cr_assert_eq(load(path, secret, sizeof secret), PLAIT_SUCCESS, "%s", plait_last_error());
  cr_expect_str_eq(secret, "no-line-break");
}

Test(secret_file, plait_secret_wins_and_the_file_is_not_read) {
  char secret[64];
  setenv("PLAIT_SECRET", "from-the-environment", 1);
  const char *path = make_file("open", "from-the-file\n", 0644); /* would be refused */
  cr_assert_eq(load(path, secret, sizeof secret), PLAIT_SUCCESS, "%s", plait_last_error());
  cr_expect_str_eq(secret, "from-the-environment");
}

Test(secret_file, a_file_others_can_read_is_refused_naming_it) {
  expect_refused(make_file("world", "s\n", 0604), "group or others");
  expect_refused(make_file("group", "s\n", 0640), "group or others");
  expect_refused(make_file("groupw", "s\n", 0620), "chmod 600");
}

Test(secret_file, an_empty_first_line_a_folder_or_no_file_is_refused) {
  expect_refused(make_file("empty", "", 0600), "is empty");
  expect_refused(make_file("blank", "\nsecret on line 2\n", 0600), "is empty");
  char sub[128];
  snprintf(sub, sizeof sub, "%s/sub", dir);
  cr_assert_eq(mkdir(sub, 0700), 0);
  expect_refused(sub, "not a regular file");
  snprintf(sub, sizeof sub, "%s/missing", dir);
  expect_refused(sub, "cannot be opened");
}

Test(secret_file, a_file_of_another_user_is_refused) {
  if (geteuid() != 0) {
    cr_log_info("not root: cannot give a file to another user; checked by the owner test only");
    char *s;
    cr_expect_eq(plait_secret_file_read("/etc/hostname", &s), PLAIT_ERR_CONFIG);
    return;
  }
  const char *path = make_file("theirs", "s\n", 0600);
  cr_assert_eq(chown(path, 65534, 65534), 0);
  expect_refused(path, "not by this user");
}
