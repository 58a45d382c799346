/*
 * Tests of the rank layout read from the launchers' environment conventions
 * (src/control/topology.c): plaitrun, Open MPI, PMI, Slurm, torchrun, their order of
 * precedence, the rendezvous address, and the local / cross ranks derived
 * from every rank's host at rendezvous.
 *
 * Each test runs in its own forked process and starts from an environment
 * without any variable of any convention (see plait_test_clear_env).
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util/config.h"
#include "util/error.h"
#include "plait/plait.h"
#include "control/net.h"
#include "control/topology.h"
#include "ranks.h"

TestSuite(topology, .init = plait_test_clear_env);
TestSuite(slurm_nodelist);
TestSuite(derive);

static void set(const char *var, const char *value) { cr_assert_eq(setenv(var, value, 1), 0); }

/* plait_config_load then plait_topology_from_env, as plait_init does. */
static plait_result_t load(plait_topology_t *t) {
  plait_config_t cfg;
  plait_result_t rc = plait_config_load(&cfg);
  if (rc) return rc;
  memset(t, 0x5A, sizeof *t);
  rc = plait_topology_from_env(&cfg, t);
  plait_config_free(&cfg);
  return rc;
}

static void load_ok(plait_topology_t *t) {
  plait_result_t rc = load(t);
  cr_assert_eq(rc, PLAIT_SUCCESS, "topology: %s: %s", plait_result_name(rc), plait_last_error());
}

/* Expects PLAIT_ERR_CONFIG with a message that contains every given word. */
static void load_fails(const char *what, const char *const *words) {
  plait_topology_t t;
  plait_error(PLAIT_SUCCESS, "stale");
  plait_result_t rc = load(&t);
  const char *msg = plait_last_error();
  cr_expect_eq(rc, PLAIT_ERR_CONFIG, "%s: got %s (%s), expected PLAIT_ERR_CONFIG", what,
               plait_result_name(rc), msg);
  for (size_t i = 0; words[i]; i++)
    cr_expect(strstr(msg, words[i]) != NULL, "%s: message does not mention \"%s\": \"%s\"", what,
              words[i], msg);
}

#define FAILS(what, ...)                                                       \
  do {                                                                         \
    const char *const words_[] = {__VA_ARGS__, NULL};                          \
    load_fails(what, words_);                                                  \
  } while (0)

/* ------------------------------------------------------------------------ */
/* One test per convention                                                   */
/* ------------------------------------------------------------------------ */

Test(topology, plaitrun) {
  set("PLAIT_RANK", "2");
  set("PLAIT_SIZE", "4");
  set("PLAIT_LOCAL_RANK", "0");
  set("PLAIT_LOCAL_SIZE", "2");
  set("PLAIT_RENDEZVOUS", "10.0.0.1:1234");
  plait_topology_t t;
  load_ok(&t);
  cr_expect_str_eq(t.source, "plaitrun");
  cr_expect_eq(t.rank, 2);
  cr_expect_eq(t.size, 4);
  cr_expect_eq(t.local_rank, 0);
  cr_expect_eq(t.local_size, 2);
  cr_expect_str_eq(t.rendezvous_host, "10.0.0.1");
  cr_expect_eq(t.rendezvous_port, 1234);
}

Test(topology, plaitrun_without_local_values_leaves_them_unknown) {
  set("PLAIT_RANK", "1");
  set("PLAIT_SIZE", "3");
  set("PLAIT_RENDEZVOUS", "rank0.example:29500");
  plait_topology_t t;
  load_ok(&t);
  cr_expect_str_eq(t.source, "plaitrun");
  cr_expect_eq(t.rank, 1);
  cr_expect_eq(t.size, 3);
  cr_expect_eq(t.local_rank, -1);
  cr_expect_eq(t.local_size, -1);
  cr_expect_str_eq(t.rendezvous_host, "rank0.example");
  cr_expect_eq(t.rendezvous_port, 29500);
}

Test(topology, open_mpi) {
  set("OMPI_COMM_WORLD_RANK", "3");
  set("OMPI_COMM_WORLD_SIZE", "8");
  set("OMPI_COMM_WORLD_LOCAL_RANK", "1");
  set("OMPI_COMM_WORLD_LOCAL_SIZE", "4");
  set("MASTER_ADDR", "head-node");
  set("MASTER_PORT", "4000");
  plait_topology_t t;
  load_ok(&t);
  cr_expect_str_eq(t.source, "Open MPI");
  cr_expect_eq(t.rank, 3);
  cr_expect_eq(t.size, 8);
  cr_expect_eq(t.local_rank, 1);
  cr_expect_eq(t.local_size, 4);
  cr_expect_str_eq(t.rendezvous_host, "head-node");
  cr_expect_eq(t.rendezvous_port, 4000);
}

Test(topology, pmi_local_values_unknown_until_derived) {
  set("PMI_RANK", "1");
  set("PMI_SIZE", "2");
  set("PLAIT_RENDEZVOUS", "127.0.0.1:5555");
  plait_topology_t t;
  load_ok(&t);
  cr_expect_str_eq(t.source, "PMI");
  cr_expect_eq(t.rank, 1);
  cr_expect_eq(t.size, 2);
  cr_expect_eq(t.local_rank, -1);
  cr_expect_eq(t.local_size, -1);
}

Test(topology, pmi_with_hydra_local_values) {
  set("PMI_RANK", "5");
  set("PMI_SIZE", "6");
  set("MPI_LOCALRANKID", "2");
  set("MPI_LOCALNRANKS", "3");
  set("PLAIT_RENDEZVOUS", "127.0.0.1:5555");
  plait_topology_t t;
  load_ok(&t);
  cr_expect_str_eq(t.source, "PMI");
  cr_expect_eq(t.local_rank, 2);
  cr_expect_eq(t.local_size, 3);
}

Test(topology, slurm) {
  set("SLURM_PROCID", "5");
  set("SLURM_NTASKS", "6");
  set("SLURM_LOCALID", "1");
  set("SLURM_NTASKS_PER_NODE", "2");
  set("SLURM_JOB_NODELIST", "gpu[07-09],cpu1");
  set("SLURM_JOB_ID", "123456");
  plait_topology_t t;
  load_ok(&t);
  cr_expect_str_eq(t.source, "Slurm");
  cr_expect_eq(t.rank, 5);
  cr_expect_eq(t.size, 6);
  cr_expect_eq(t.local_rank, 1);
  cr_expect_eq(t.local_size, 2);
  cr_expect_str_eq(t.rendezvous_host, "gpu07");
  cr_expect_eq(t.rendezvous_port, 29500 + 456, "port %d", t.rendezvous_port);
}

Test(topology, slurm_tasks_per_node_repeat_form_gives_local_size) {
  set("SLURM_PROCID", "3");
  set("SLURM_NTASKS", "6");
  set("SLURM_LOCALID", "1");
  set("SLURM_NTASKS_PER_NODE", "2(x3)");
  set("SLURM_JOB_NODELIST", "n[1-3]");
  plait_topology_t t;
  load_ok(&t);
  cr_expect_str_eq(t.source, "Slurm");
  cr_expect_eq(t.local_rank, 1);
  cr_expect_eq(t.local_size, 2, "\"2(x3)\" read as %d", t.local_size);
  cr_expect_str_eq(t.rendezvous_host, "n1");
  cr_expect_eq(t.rendezvous_port, 29500, "no SLURM_JOB_ID: port %d", t.rendezvous_port);

  set("SLURM_NTASKS_PER_NODE", "4(x1),2");
  load_ok(&t);
  cr_expect_eq(t.local_size, -1, "\"4(x1),2\" read as %d", t.local_size);
}

/* Under srun: the step's own node list and tasks per node (set by srun, where
 * SLURM_NTASKS_PER_NODE is not unless asked) win over the job's. */
Test(topology, slurm_step_of_part_of_the_allocation) {
  set("SLURM_PROCID", "1");
  set("SLURM_NTASKS", "2");
  set("SLURM_LOCALID", "1");
  set("SLURM_JOB_NODELIST", "node[03-04]");
  set("SLURM_STEP_NODELIST", "node04");
  set("SLURM_STEP_TASKS_PER_NODE", "2");
  set("SLURM_NTASKS_PER_NODE", "1(x2)");
  set("SLURM_JOB_ID", "77");
  plait_topology_t t;
  load_ok(&t);
  cr_expect_str_eq(t.rendezvous_host, "node04", "not the step's first node");
  cr_expect_eq(t.rendezvous_port, 29577);
  cr_expect_eq(t.local_size, 2, "SLURM_STEP_TASKS_PER_NODE=2 read as %d", t.local_size);
  set("SLURM_STEP_TASKS_PER_NODE", "2(x");
  plait_config_t cfg;
  cr_assert_eq(plait_config_load(&cfg), PLAIT_SUCCESS);
  cr_expect_neq(plait_topology_from_env(&cfg, &t), PLAIT_SUCCESS);
  cr_expect(strstr(plait_last_error(), "SLURM_STEP_TASKS_PER_NODE='2(x'") != NULL, "%s",
            plait_last_error());
  plait_config_free(&cfg);
}

Test(topology, slurm_port_from_master_port_and_host_from_master_addr) {
  set("SLURM_PROCID", "0");
  set("SLURM_NTASKS", "2");
  set("SLURM_JOB_NODELIST", "node[03-04]");
  set("SLURM_JOB_ID", "1999");
  set("MASTER_PORT", "31000");
  plait_topology_t t;
  load_ok(&t);
  cr_expect_str_eq(t.rendezvous_host, "node03");
  cr_expect_eq(t.rendezvous_port, 31000, "MASTER_PORT ignored: %d", t.rendezvous_port);
  set("MASTER_ADDR", "elsewhere");
  load_ok(&t);
  cr_expect_str_eq(t.rendezvous_host, "elsewhere", "MASTER_ADDR loses to SLURM_JOB_NODELIST");
  cr_expect_eq(t.rendezvous_port, 31000);
  set("PLAIT_RENDEZVOUS", "chosen:777");
  load_ok(&t);
  cr_expect_str_eq(t.rendezvous_host, "chosen", "PLAIT_RENDEZVOUS loses to MASTER_ADDR");
  cr_expect_eq(t.rendezvous_port, 777);
}

/* IPv6 rendezvous addresses: bracketed in PLAIT_RENDEZVOUS, bare or
 * bracketed in MASTER_ADDR (torchrun accepts both). */
Test(topology, ipv6_rendezvous_addresses) {
  set("PLAIT_RANK", "0");
  set("PLAIT_SIZE", "2");
  set("PLAIT_RENDEZVOUS", "[::1]:29556");
  plait_topology_t t;
  load_ok(&t);
  cr_expect_str_eq(t.rendezvous_host, "::1");
  cr_expect_eq(t.rendezvous_port, 29556);
  unsetenv("PLAIT_RENDEZVOUS");
  set("MASTER_ADDR", "[fe80::1%eth0]");
  set("MASTER_PORT", "29400");
  load_ok(&t);
  cr_expect_str_eq(t.rendezvous_host, "fe80::1%eth0");
  set("MASTER_ADDR", "::1");
  load_ok(&t);
  cr_expect_str_eq(t.rendezvous_host, "::1");
  cr_expect_eq(t.rendezvous_port, 29400);
  char text[64];
  plait_net_format_hostport("::1", 29556, text, sizeof text);
  cr_expect_str_eq(text, "[::1]:29556", "the form PLAIT_RENDEZVOUS takes");
  plait_net_format_hostport("10.0.0.1", 1, text, sizeof text);
  cr_expect_str_eq(text, "10.0.0.1:1");
}

Test(topology, torchrun) {
  set("RANK", "1");
  set("WORLD_SIZE", "4");
  set("LOCAL_RANK", "1");
  set("LOCAL_WORLD_SIZE", "2");
  set("MASTER_ADDR", "master.example");
  set("MASTER_PORT", "29400");
  plait_topology_t t;
  load_ok(&t);
  cr_expect_str_eq(t.source, "torchrun");
  cr_expect_eq(t.rank, 1);
  cr_expect_eq(t.size, 4);
  cr_expect_eq(t.local_rank, 1);
  cr_expect_eq(t.local_size, 2);
  cr_expect_str_eq(t.rendezvous_host, "master.example");
  cr_expect_eq(t.rendezvous_port, 29400);
}

Test(topology, torchrun_master_addr_without_port_uses_29500) {
  set("RANK", "0");
  set("WORLD_SIZE", "2");
  set("MASTER_ADDR", "10.1.2.3");
  plait_topology_t t;
  load_ok(&t);
  cr_expect_str_eq(t.rendezvous_host, "10.1.2.3");
  cr_expect_eq(t.rendezvous_port, 29500);
}

Test(topology, none_is_a_single_rank) {
  plait_topology_t t;
  load_ok(&t);
  cr_expect_str_eq(t.source, "single");
  cr_expect_eq(t.rank, 0);
  cr_expect_eq(t.size, 1);
  cr_expect_eq(t.local_rank, 0);
  cr_expect_eq(t.local_size, 1);
  cr_expect_eq(t.cross_rank, 0);
  cr_expect_eq(t.cross_size, 1);
  cr_expect_eq(t.rendezvous_port, 0);
}

Test(topology, one_rank_from_a_launcher_needs_no_rendezvous) {
  set("OMPI_COMM_WORLD_RANK", "0");
  set("OMPI_COMM_WORLD_SIZE", "1");
  plait_topology_t t;
  load_ok(&t);
  cr_expect_str_eq(t.source, "Open MPI");
  cr_expect_eq(t.size, 1);
  cr_expect_eq(t.local_rank, 0);
  cr_expect_eq(t.local_size, 1);
  cr_expect_eq(t.cross_rank, 0);
  cr_expect_eq(t.cross_size, 1);
}

/* ------------------------------------------------------------------------ */
/* Precedence: PLAIT_* > Open MPI > PMI > Slurm > torchrun > single           */
/* ------------------------------------------------------------------------ */

Test(topology, precedence) {
  set("PLAIT_RANK", "1");
  set("PLAIT_SIZE", "2");
  set("OMPI_COMM_WORLD_RANK", "2");
  set("OMPI_COMM_WORLD_SIZE", "3");
  set("PMI_RANK", "3");
  set("PMI_SIZE", "4");
  set("SLURM_PROCID", "4");
  set("SLURM_NTASKS", "5");
  set("RANK", "5");
  set("WORLD_SIZE", "6");
  set("MASTER_ADDR", "localhost");
  set("MASTER_PORT", "29501");
  static const struct {
    const char *source;
    int rank, size;
    const char *unset_rank, *unset_size; /* to fall through to the next */
  } order[] = {
      {"plaitrun", 1, 2, "PLAIT_RANK", "PLAIT_SIZE"},
      {"Open MPI", 2, 3, "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"},
      {"PMI", 3, 4, "PMI_RANK", "PMI_SIZE"},
      {"Slurm", 4, 5, "SLURM_PROCID", "SLURM_NTASKS"},
      {"torchrun", 5, 6, "RANK", "WORLD_SIZE"},
      {"single", 0, 1, NULL, NULL},
  };
  for (size_t i = 0; i < sizeof order / sizeof order[0]; i++) {
    plait_topology_t t;
    load_ok(&t);
    cr_expect_str_eq(t.source, order[i].source, "step %zu", i);
    cr_expect_eq(t.rank, order[i].rank, "%s: rank %d", order[i].source, t.rank);
    cr_expect_eq(t.size, order[i].size, "%s: size %d", order[i].source, t.size);
    if (order[i].unset_rank) {
      unsetenv(order[i].unset_rank);
      unsetenv(order[i].unset_size);
    }
  }
}

/* ------------------------------------------------------------------------ */
/* Errors                                                                    */
/* ------------------------------------------------------------------------ */

Test(topology, rank_not_below_size) {
  set("PLAIT_RANK", "4");
  set("PLAIT_SIZE", "4");
  set("PLAIT_RENDEZVOUS", "h:1");
  FAILS("PLAIT_RANK=4 PLAIT_SIZE=4", "PLAIT_RANK=4", "PLAIT_SIZE=4", "plaitrun");
  plait_test_clear_env();
  set("OMPI_COMM_WORLD_RANK", "9");
  set("OMPI_COMM_WORLD_SIZE", "8");
  set("PLAIT_RENDEZVOUS", "h:1");
  FAILS("OMPI rank 9 of 8", "OMPI_COMM_WORLD_RANK=9", "OMPI_COMM_WORLD_SIZE=8", "Open MPI");
}

Test(topology, size_zero) {
  set("PLAIT_RANK", "0");
  set("PLAIT_SIZE", "0");
  FAILS("PLAIT_SIZE=0", "PLAIT_SIZE='0'", "out of range", "1 to 16777216"); /* the table's range */
  plait_test_clear_env();
  set("RANK", "0");
  set("WORLD_SIZE", "0");
  FAILS("WORLD_SIZE=0", "WORLD_SIZE=0", "at least 1", "torchrun");
}

Test(topology, local_rank_not_below_local_size) {
  set("PLAIT_RANK", "0");
  set("PLAIT_SIZE", "4");
  set("PLAIT_LOCAL_RANK", "2");
  set("PLAIT_LOCAL_SIZE", "2");
  set("PLAIT_RENDEZVOUS", "h:1");
  FAILS("local 2 of 2", "local rank 2", "local size 2");
  set("PLAIT_LOCAL_RANK", "0");
  set("PLAIT_LOCAL_SIZE", "0");
  FAILS("local size 0", "PLAIT_LOCAL_SIZE='0'", "out of range", "1 to 16777216");
}

Test(topology, plait_rank_and_size_go_together) {
  set("PLAIT_RANK", "0");
  set("PLAIT_RENDEZVOUS", "h:1");
  FAILS("PLAIT_RANK alone", "PLAIT_RANK", "PLAIT_SIZE", "missing");
  unsetenv("PLAIT_RANK");
  set("PLAIT_SIZE", "2");
  FAILS("PLAIT_SIZE alone", "PLAIT_RANK", "missing");
}

Test(topology, launcher_rank_and_size_go_together) {
  static const struct {
    const char *set, *missing, *source;
  } cases[] = {
      {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "Open MPI"},
      {"OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_RANK", "Open MPI"},
      {"PMI_RANK", "PMI_SIZE", "PMI"},
      {"SLURM_NTASKS", "SLURM_PROCID", "Slurm"},
      {"RANK", "WORLD_SIZE", "torchrun"},
      {"WORLD_SIZE", "RANK", "torchrun"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    plait_test_clear_env();
    set(cases[i].set, "1");
    set("PLAIT_RENDEZVOUS", "h:1");
    FAILS(cases[i].set, cases[i].set, cases[i].missing, cases[i].source);
  }
}

Test(topology, bad_numbers) {
  static const struct {
    const char *var, *value;
    const char *const companions[6]; /* NAME, value pairs to select the convention */
  } cases[] = {
      {"OMPI_COMM_WORLD_RANK", "abc", {"OMPI_COMM_WORLD_SIZE", "2"}},
      {"OMPI_COMM_WORLD_RANK", "-1", {"OMPI_COMM_WORLD_SIZE", "2"}},
      {"OMPI_COMM_WORLD_RANK", "", {"OMPI_COMM_WORLD_SIZE", "2"}},
      {"OMPI_COMM_WORLD_SIZE", "2x", {"OMPI_COMM_WORLD_RANK", "0"}},
      {"OMPI_COMM_WORLD_SIZE", "99999999999", {"OMPI_COMM_WORLD_RANK", "0"}},
      {"OMPI_COMM_WORLD_LOCAL_RANK", "1.0", {"OMPI_COMM_WORLD_RANK", "0", "OMPI_COMM_WORLD_SIZE", "2"}},
      {"OMPI_COMM_WORLD_LOCAL_SIZE", "four", {"OMPI_COMM_WORLD_RANK", "0", "OMPI_COMM_WORLD_SIZE", "2"}},
      {"PMI_RANK", " 1", {"PMI_SIZE", "2"}},
      {"PMI_SIZE", "+2", {"PMI_RANK", "0"}},
      {"MPI_LOCALRANKID", "x", {"PMI_RANK", "0", "PMI_SIZE", "2"}},
      {"SLURM_PROCID", "1e3", {"SLURM_NTASKS", "2"}},
      {"SLURM_LOCALID", "-3", {"SLURM_PROCID", "0", "SLURM_NTASKS", "2"}},
      {"SLURM_NTASKS_PER_NODE", "two", {"SLURM_PROCID", "0", "SLURM_NTASKS", "2"}},
      {"RANK", "3 ", {"WORLD_SIZE", "4"}},
      {"LOCAL_WORLD_SIZE", "0x2", {"RANK", "0", "WORLD_SIZE", "4"}},
      {"MASTER_PORT", "abc", {"RANK", "0", "WORLD_SIZE", "2", "MASTER_ADDR", "h"}},
      {"MASTER_PORT", "0", {"RANK", "0", "WORLD_SIZE", "2", "MASTER_ADDR", "h"}},
      {"MASTER_PORT", "70000", {"RANK", "0", "WORLD_SIZE", "2", "MASTER_ADDR", "h"}},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    plait_test_clear_env();
    for (size_t k = 0; k + 1 < 6 && cases[i].companions[k]; k += 2)
      set(cases[i].companions[k], cases[i].companions[k + 1]);
    set(cases[i].var, cases[i].value);
    if (!getenv("MASTER_ADDR")) set("PLAIT_RENDEZVOUS", "h:1");
    char quoted[128];
    snprintf(quoted, sizeof quoted, "%s='%s'", cases[i].var, cases[i].value);
    FAILS(quoted, quoted);
  }
}

Test(topology, several_ranks_need_a_rendezvous_address) {
  set("OMPI_COMM_WORLD_RANK", "0");
  set("OMPI_COMM_WORLD_SIZE", "2");
  FAILS("no rendezvous", "PLAIT_RENDEZVOUS", "2 ranks");
  plait_test_clear_env();
  set("RANK", "0");
  set("WORLD_SIZE", "2");
  set("MASTER_PORT", "29400"); /* a port alone is not an address */
  FAILS("MASTER_PORT only", "PLAIT_RENDEZVOUS");
}

Test(topology, unreadable_slurm_nodelist) {
  set("SLURM_PROCID", "0");
  set("SLURM_NTASKS", "2");
  set("SLURM_JOB_NODELIST", "[");
  FAILS("SLURM_JOB_NODELIST=[", "SLURM_JOB_NODELIST='['", "PLAIT_RENDEZVOUS");
}

Test(topology, rendezvous_syntax) {
  set("PLAIT_RANK", "0");
  set("PLAIT_SIZE", "2");
  static const char *bad[] = {"nohost", "h:0", "h:70000", "::1:29500", "h:", ":29500", "h:12x",
                              "h:-1", "[::1]29500", "[::1:29500", "[]:29500", "h:29500 "};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    set("PLAIT_RENDEZVOUS", bad[i]);
    char quoted[128];
    snprintf(quoted, sizeof quoted, "PLAIT_RENDEZVOUS='%s'", bad[i]);
    FAILS(quoted, quoted, "host:port");
  }
  static const struct {
    const char *text, *host;
    int port;
  } good[] = {
      {"[::1]:29500", "::1", 29500},
      {"[fe80::1%eth0]:1", "fe80::1%eth0", 1},
      {"h:1", "h", 1},
      {"h:65535", "h", 65535},
      {"node-3.cluster.local:29501", "node-3.cluster.local", 29501},
      {"127.0.0.1:80", "127.0.0.1", 80},
  };
  for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
    set("PLAIT_RENDEZVOUS", good[i].text);
    plait_topology_t t;
    plait_result_t rc = load(&t);
    cr_expect_eq(rc, PLAIT_SUCCESS, "PLAIT_RENDEZVOUS='%s': %s", good[i].text, plait_last_error());
    if (rc) continue;
    cr_expect_str_eq(t.rendezvous_host, good[i].host, "from '%s'", good[i].text);
    cr_expect_eq(t.rendezvous_port, good[i].port, "from '%s'", good[i].text);
  }
}

Test(topology, hostname_identity) {
  set("PLAIT_HOSTNAME", "rack4-node17");
  plait_topology_t t;
  load_ok(&t);
  cr_expect_str_eq(t.host, "rack4-node17");

  unsetenv("PLAIT_HOSTNAME");
  char real[PLAIT_HOST_MAX] = "";
  cr_assert_eq(gethostname(real, sizeof real - 1), 0);
  load_ok(&t);
  cr_expect_str_eq(t.host, real, "without PLAIT_HOSTNAME the host is gethostname()");

  set("PLAIT_HOSTNAME", ""); /* empty: gethostname() */
  load_ok(&t);
  cr_expect_str_eq(t.host, real);
}

/* ------------------------------------------------------------------------ */
/* plait_slurm_first_host                                                    */
/* ------------------------------------------------------------------------ */

Test(slurm_nodelist, first_host) {
  static const struct {
    const char *list, *want;
  } cases[] = {
      {"node[03-05,7],gpu1", "node03"},
      {"gpu1,gpu2", "gpu1"},
      {"a[1]", "a1"},
      {"n[001-004]", "n001"},
      {"solo", "solo"},
      {"rack1-node[10,2]", "rack1-node10"},
      {"x[7,9-10],y[1-2]", "x7"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    char out[PLAIT_HOST_MAX];
    memset(out, 'Z', sizeof out);
    int rc = plait_slurm_first_host(cases[i].list, out, sizeof out);
    cr_expect_eq(rc, 0, "plait_slurm_first_host(\"%s\") = %d", cases[i].list, rc);
    if (!rc) cr_expect_str_eq(out, cases[i].want, "from \"%s\"", cases[i].list);
  }
}

Test(slurm_nodelist, malformed) {
  static const char *bad[] = {"[", "", ",a", "node[", "node[x]", "node[3", "node[-3]", "node[]"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    char out[PLAIT_HOST_MAX];
    int rc = plait_slurm_first_host(bad[i], out, sizeof out);
    cr_expect_eq(rc, -1, "plait_slurm_first_host(\"%s\") = %d, out \"%s\"", bad[i], rc,
                 rc ? "" : out);
  }
}

Test(slurm_nodelist, respects_the_capacity) {
  char out[8];
  memset(out, 'Z', sizeof out);
  cr_expect_eq(plait_slurm_first_host("node03", out, 7), 0);
  cr_expect_str_eq(out, "node03");
  memset(out, 'Z', sizeof out);
  cr_expect_eq(plait_slurm_first_host("node03", out, 6), -1);
  cr_expect_eq(out[6], 'Z', "wrote past the capacity");
  memset(out, 'Z', sizeof out);
  cr_expect_eq(plait_slurm_first_host("node[003-4]", out, 6), -1);
  cr_expect_eq(out[6], 'Z', "wrote past the capacity");
}

/* ------------------------------------------------------------------------ */
/* plait_topology_derive                                                     */
/* ------------------------------------------------------------------------ */

typedef struct {
  int local_rank, local_size, cross_rank, cross_size;
} derived_t;

/* Runs plait_topology_derive as each rank in turn and compares with want. */
static void check_derive(int n, const char *const *host_names, const int *lr, const int *ls,
                         const derived_t *want) {
  char(*hosts)[PLAIT_HOST_MAX] = calloc((size_t)n, PLAIT_HOST_MAX);
  cr_assert_not_null(hosts);
  for (int r = 0; r < n; r++) snprintf(hosts[r], PLAIT_HOST_MAX, "%s", host_names[r]);
  for (int r = 0; r < n; r++) {
    plait_topology_t t;
    memset(&t, 0, sizeof t);
    t.rank = r;
    t.size = n;
    t.local_rank = lr[r];
    t.local_size = ls[r];
    t.cross_rank = t.cross_size = -7;
    plait_result_t rc = plait_topology_derive(&t, hosts, lr, ls);
    cr_assert_eq(rc, PLAIT_SUCCESS, "%s", plait_last_error());
    cr_expect_eq(t.rank, r, "rank changed");
    cr_expect_eq(t.size, n, "size changed");
    cr_expect_eq(t.local_rank, want[r].local_rank, "rank %d: local_rank %d, expected %d", r,
                 t.local_rank, want[r].local_rank);
    cr_expect_eq(t.local_size, want[r].local_size, "rank %d: local_size %d, expected %d", r,
                 t.local_size, want[r].local_size);
    cr_expect_eq(t.cross_rank, want[r].cross_rank, "rank %d: cross_rank %d, expected %d", r,
                 t.cross_rank, want[r].cross_rank);
    cr_expect_eq(t.cross_size, want[r].cross_size, "rank %d: cross_size %d, expected %d", r,
                 t.cross_size, want[r].cross_size);
  }
  free(hosts);
}

Test(derive, two_hosts_two_ranks_each) {
  const char *hosts[] = {"A", "A", "B", "B"};
  const int unknown[] = {-1, -1, -1, -1};
  const derived_t want[] = {{0, 2, 0, 2}, {1, 2, 0, 2}, {0, 2, 1, 2}, {1, 2, 1, 2}};
  check_derive(4, hosts, unknown, unknown, want);
}

Test(derive, uneven_hosts) {
  const char *hosts[] = {"A", "A", "A", "B"};
  const int unknown[] = {-1, -1, -1, -1};
  const derived_t want[] = {{0, 3, 0, 2}, {1, 3, 0, 1}, {2, 3, 0, 1}, {0, 1, 1, 2}};
  check_derive(4, hosts, unknown, unknown, want);
}

Test(derive, interleaved_hosts) {
  const char *hosts[] = {"A", "B", "A", "B", "C"};
  const int unknown[] = {-1, -1, -1, -1, -1};
  const derived_t want[] = {{0, 2, 0, 3}, {0, 2, 1, 3}, {1, 2, 0, 2}, {1, 2, 1, 2}, {0, 1, 2, 3}};
  check_derive(5, hosts, unknown, unknown, want);
}

Test(derive, host_names_compared_whole) {
  const char *hosts[] = {"node1", "node10", "node1"};
  const int unknown[] = {-1, -1, -1};
  const derived_t want[] = {{0, 2, 0, 2}, {0, 1, 1, 2}, {1, 2, 0, 1}};
  check_derive(3, hosts, unknown, unknown, want);
}

Test(derive, launcher_local_ranks_respected) {
  /* the launcher numbered the ranks on each host in reverse */
  const char *hosts[] = {"A", "A", "B", "B"};
  const int lr[] = {1, 0, 1, 0};
  const int ls[] = {2, 2, 2, 2};
  const derived_t want[] = {{1, 2, 0, 2}, {0, 2, 0, 2}, {1, 2, 1, 2}, {0, 2, 1, 2}};
  check_derive(4, hosts, lr, ls, want);
}

Test(derive, launcher_local_size_respected) {
  /* one host identity, but the launcher knows better (e.g. containers) */
  const char *hosts[] = {"same", "same"};
  const int lr[] = {0, 0};
  const int ls[] = {1, 1};
  const derived_t want[] = {{0, 1, 0, 2}, {0, 1, 1, 2}};
  check_derive(2, hosts, lr, ls, want);
}

Test(derive, single_rank) {
  const char *hosts[] = {"only"};
  const int unknown[] = {-1};
  const derived_t want[] = {{0, 1, 0, 1}};
  check_derive(1, hosts, unknown, unknown, want);
}
