/*
 * The one configuration table: X(field, "VARIABLE", type, "default",
 * "range", "help"). The range "lo..hi" (inclusive, written as the type's values
 * are, e.g. "0..16G") bounds every numeric variable; a value outside it is
 * refused at init and by plait_config_set, naming the variable, the value and
 * the range. Non-numeric types have "" (their values are listed by the type).
 * Every PLAIT_* variable of the core is declared here and nowhere else;
 * `plaitrun --help-env` prints it, and the table in docs/configuration.md
 * must list exactly these names with these types and defaults (checked by
 * tests/core/test_docs.c). Plugins
 * declare and check their own (PLAIT_OFI_*: plugins/ofi/tunables.c).
 *
 * Types: NAME (lowercase word), TEXT (any string), SIZE (bytes, with K/M/G/T
 * units), COUNT (integer >= 0), RANKNUM (integer >= 0, unset = -1),
 * SECONDS (number >= 0), POSITIVE (number > 0), BOOL, LEVEL (log level).
 */
#ifndef PLAIT_CONFIG_TABLE_H
#define PLAIT_CONFIG_TABLE_H

#define PLAIT_CONFIG_TABLE(X)                                                  \
  X(transport, "PLAIT_TRANSPORT", NAME, "auto", "",                            \
    "transport plugin to load: auto, gloo, ofi or nccl (built only where "    \
    "CUDA and NCCL are found; device memory only) "                          \
    "(libplait-transport-<name>.so); auto: ofi where every rank can start "    \
    "it with the same provider, else gloo, alike on every rank")              \
  X(plugin_path, "PLAIT_PLUGIN_PATH", TEXT, "", "",                            \
    "colon-separated folders searched for transport plugins before the "       \
    "folder of libplait.so")                                                   \
  X(fusion_threshold, "PLAIT_FUSION_THRESHOLD", SIZE, "64M", "0..16G",         \
    "most bytes of allreduces fused into one collective, decided on rank 0 "   \
    "(units K, M, G); the fusion buffer grows as needed; 0 disables fusion")   \
  X(fusion_max_tensor, "PLAIT_FUSION_MAX_TENSOR", SIZE, "0", "0..1T",          \
    "allreduce tensors larger than this skip the fusion buffer and are "       \
    "reduced alone, in place; 0: no limit besides the threshold")              \
  X(cycle_time_ms, "PLAIT_CYCLE_TIME_MS", POSITIVE, "1", "0.01..86400000",     \
    "longest hold, in milliseconds, of ready allreduces waiting for the "      \
    "ones that ran with them last time")                                       \
  X(spin_us, "PLAIT_SPIN_US", COUNT, "100", "0..1000000",                      \
    "microseconds the coordinator keeps polling, yielding the CPU, after it "  \
    "last did work, before it sleeps (an answer that comes meanwhile costs "   \
    "no wake-up); paused (10 ms, doubling up to 1 s while it recurs) after "   \
    "another thread held the CPU meanwhile (not right after a long "          \
    "collective); 0: always sleep")                                            \
  X(thread_affinity, "PLAIT_THREAD_AFFINITY", TEXT, "", "",                    \
    "comma-separated CPU ids, one per local rank: each rank pins its "         \
    "coordinator thread to the id at its local rank (Horovod's "               \
    "HOROVOD_THREAD_AFFINITY); empty: not pinned")                             \
  X(cache_capacity, "PLAIT_CACHE_CAPACITY", COUNT, "1024", "0..1048576",       \
    "response cache entries; 0 disables the cache")                            \
  X(cached_epoch, "PLAIT_CACHED_EPOCH", BOOL, "1", "",                         \
    "rank 0 may open a cached epoch after a list of cached allreduces: "      \
    "while the same burst recurs, ranks agree on it with a 1-byte AND over "  \
    "the transport instead of a round trip through rank 0 (rank 0's value "   \
    "counts)")                                                                 \
  X(caller_runs, "PLAIT_CALLER_RUNS", NAME, "auto", "",                       \
    "in a cached epoch whose burst is one allreduce, the thread that waits "  \
    "on it (plait_wait) runs the round itself when the coordinator is idle "  \
    "(no hand-off to the coordinator and back): auto (where the transport's " \
    "vote lets a wait leave the agreement at its timeout: ofi), or 0/1, "     \
    "on/off, true/false, yes/no; each rank's own value")                      \
  X(control_fanout, "PLAIT_CONTROL_FANOUT", COUNT, "8", "0..65536",           \
    "fan-out k of the control-plane tree that carries rank 0's response "     \
    "lists (each rank relays them to k ranks) in jobs of more than k+1 "       \
    "ranks (the default: jobs of 10 ranks or more); 0 or 1: rank 0 sends "     \
    "every list to every rank (the star)")                                    \
  X(timeline, "PLAIT_TIMELINE", TEXT, "", "",                                  \
    "path of a Chrome-trace JSON timeline to write (%r: the rank); empty: none") \
  X(timeline_mark_cycles, "PLAIT_TIMELINE_MARK_CYCLES", BOOL, "0", "",         \
    "mark the coordinator cycles that did work on the timeline (CYCLE "        \
    "instants); can change while running")                                     \
  X(stall_warn_s, "PLAIT_STALL_WARN_S", SECONDS, "60", "0..86400",             \
    "warn about tensors some ranks have not submitted after this many "        \
    "seconds, and fail ranks that wait on each other with nothing moving "     \
    "for as long (a deadlock); 0 disables both")                               \
  X(stall_abort_s, "PLAIT_STALL_ABORT_S", SECONDS, "0", "0..86400",            \
    "fail stalled operations after this many seconds; 0 never")                \
  X(timeout_s, "PLAIT_TIMEOUT_S", POSITIVE, "60", "1..86400",                  \
    "seconds of silence after which a peer is declared lost")                  \
  X(start_timeout_s, "PLAIT_START_TIMEOUT_S", POSITIVE, "60", "0.1..86400",    \
    "seconds ranks wait for each other in plait_init")                         \
  X(log_level, "PLAIT_LOG_LEVEL", LEVEL, "warn", "",                           \
    "log level: trace, debug, info, warn, error or off")                       \
  X(rendezvous, "PLAIT_RENDEZVOUS", TEXT, "", "",                              \
    "host:port where rank 0 listens (binds that address only); empty: "        \
    "MASTER_ADDR:MASTER_PORT or the first Slurm node, port 29500")             \
  X(secret, "PLAIT_SECRET", TEXT, "", "",                                      \
    "job secret proven by HMAC challenge-response, never sent; plaitrun "      \
    "makes one (required when size > 1)")                                      \
  X(secret_file, "PLAIT_SECRET_FILE", TEXT, "", "",                            \
    "path of a private file (mode 600, yours) whose first line is the job "    \
    "secret, read when PLAIT_SECRET is unset (a Slurm job's secret)")          \
  X(autotune, "PLAIT_AUTOTUNE", BOOL, "0", "",                                 \
    "tune the fusion threshold, the largest fused tensor and the cycle time "  \
    "while the job runs (rank 0 decides for every rank); variables set "       \
    "explicitly stay fixed; can change while running (on rank 0)")            \
  X(autotune_log, "PLAIT_AUTOTUNE_LOG", TEXT, "", "",                          \
    "path of a CSV file where rank 0 writes every autotune sample; empty: "    \
    "none")                                                                    \
  X(autotune_warmup_samples, "PLAIT_AUTOTUNE_WARMUP_SAMPLES", COUNT, "3",      \
    "0..1000", "autotune samples discarded at the start (and after the "       \
    "traffic changes)")                                                        \
  X(autotune_steps_per_sample, "PLAIT_AUTOTUNE_STEPS_PER_SAMPLE", COUNT, "3", \
    "1..100000", "training steps per autotune sample, at least (a step ends "  \
    "where a tensor name comes back)")                                         \
  X(autotune_sample_min_s, "PLAIT_AUTOTUNE_SAMPLE_MIN_S", SECONDS, "0",        \
    "0..3600", "an autotune sample lasts at least this long, in whole "        \
    "training steps")                                                          \
  X(autotune_max_samples, "PLAIT_AUTOTUNE_MAX_SAMPLES", COUNT, "100",          \
    "3..100000", "most samples autotune measures before it settles on the "    \
    "best seen")                                                               \
  X(rank, "PLAIT_RANK", RANKNUM, "", "0..16777215",                            \
    "this process's rank (set by plaitrun; else taken from the launcher)")     \
  X(size, "PLAIT_SIZE", RANKNUM, "", "1..16777216", "number of ranks (set by plaitrun)") \
  X(local_rank, "PLAIT_LOCAL_RANK", RANKNUM, "", "0..16777215",                \
    "rank on this host (set by plaitrun); unset: derived at rendezvous")       \
  X(local_size, "PLAIT_LOCAL_SIZE", RANKNUM, "", "1..16777216",                \
    "ranks on this host (set by plaitrun); unset: derived at rendezvous")      \
  X(hostname, "PLAIT_HOSTNAME", TEXT, "", "",                                  \
    "host identity used to group ranks into hosts; empty: gethostname()")      \
  X(process_sets, "PLAIT_PROCESS_SETS", TEXT, "", "",                          \
    "process sets plait_init adds, ids 1, 2, ... in order: ranks separated "   \
    "by commas, sets by semicolons (\"0,1;1,2,3\"); the same on every rank")   \
  X(dynamic_process_sets, "PLAIT_DYNAMIC_PROCESS_SETS", BOOL, "0", "",         \
    "allow plait_process_set_add/remove while plait runs (collective calls)")  \
  X(hierarchical_allreduce, "PLAIT_HIERARCHICAL_ALLREDUCE", NAME, "auto", "",  \
    "allreduce within each host, then across hosts, then within the host "    \
    "again, when ranks share hosts (>= 2 hosts, the same number >= 2 of "     \
    "ranks on each): auto (per response, from PLAIT_HIERARCHICAL_THRESHOLD "  \
    "bytes up, where the placement cuts the bytes across hosts 1.5x with "   \
    "the steps within the host on shared memory, 2x without), on or off; "  \
    "rank 0's value is the job's")                                            \
  X(hierarchical_allgather, "PLAIT_HIERARCHICAL_ALLGATHER", NAME, "off", "",   \
    "allgather across hosts among the ranks of each local index, then "      \
    "within each host, when ranks share hosts (as the hierarchical "         \
    "allreduce): off (measured level at best), auto (from "                 \
    "PLAIT_HIERARCHICAL_THRESHOLD bytes of output up, where the placement "  \
    "halves the bytes across hosts) or on; rank 0's value is the job's")     \
  X(hierarchical_threshold, "PLAIT_HIERARCHICAL_THRESHOLD", SIZE, "1M",        \
    "0..1T", "smallest allreduce (bytes, after fusion) or allgather (bytes "  \
    "of output) that runs hierarchically under auto")                         \
  X(hierarchical_local_transport, "PLAIT_HIERARCHICAL_LOCAL_TRANSPORT", NAME, \
    "auto", "", "what the hierarchical collectives' steps within a host run "  \
    "on: auto (shared memory: the ofi plugin over libfabric's shm provider, "  \
    "where every rank opens it; else the job's transport, with an info line " \
    "saying why) or job (the job's transport); rank 0's value is the job's")  \
  X(elastic_driver, "PLAIT_ELASTIC_DRIVER", TEXT, "", "",                      \
    "host:port of the elastic driver that started this worker (set by "        \
    "plaitrun --min-np/--max-np/--host-discovery-script): plait_init asks it " \
    "for this worker's rank, size and rendezvous; empty: not elastic")         \
  X(elastic_worker, "PLAIT_ELASTIC_WORKER", TEXT, "", "",                      \
    "this worker's stable name, host/slot (set by plaitrun's elastic driver)") \
  X(elastic_timeout_s, "PLAIT_ELASTIC_TIMEOUT_S", SECONDS, "600", "0..604800", \
    "seconds the driver waits for --min-np slots (plaitrun --elastic-timeout)" \
    "; plait_init waits for its place that long and 30 s more")               \
  X(elastic_join_grace_s, "PLAIT_ELASTIC_JOIN_GRACE_S", SECONDS, "5",          \
    "0..3600", "read by plaitrun's elastic driver: seconds it waits, after "   \
    "the first worker of a job asks to re-form it, for the others before "     \
    "killing them")

#endif
