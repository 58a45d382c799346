"""plait.common: the framework-independent layer of the Horovod-compatible
bindings (horovod.common's counterpart), shared by plait.torch and the other
framework bindings:

    plait.common.exceptions    HorovodInternalError, HostsUpdatedInterrupt, ...
    plait.common.basics        life cycle, queries, timeline and build queries
                               with Horovod 0.28's semantics
    plait.common.process_sets  ProcessSet, global_process_set, add/remove_process_set
    plait.common.ops           the framework-neutral part of every binding's
                               operations: op resolution, root/row checks,
                               split_list, object pickling, Compression
    plait.common.names         automatic names of unnamed operations
    plait.common.library       finding libplait and the framework adapters
    plait.common.elastic       elastic training's worker loop and states (State,
                               ObjectState, run_fn), Horovod 0.28.1's

Importing this package loads nothing else (plait._core imports
plait.common.exceptions and plait.common.library while it loads).
"""
