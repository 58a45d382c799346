"""Ranks for Ray actors (plait.ray.runner): each node's actors contiguous.

Pure functions of the actors' node ids, so they are the same on every
driver and testable without Ray. Nodes come in the order their first actor
was created (bundle order); within a node actors keep their creation order.
"""


def assign_ranks(node_ids):
    """node_ids[i]: the Ray node id of actor i (creation order).

    Returns one dict per rank, in rank order: {"actor": i, "rank",
    "size", "local_rank", "local_size", "cross_rank", "cross_size",
    "node_id"}. cross_rank/cross_size are plait's own (docs/design.md: the
    index of this node among the nodes that have this local rank), which
    plait derives itself from PLAIT_HOSTNAME and PLAIT_LOCAL_RANK.
    """
    nodes = []
    by_node = {}
    for i, node in enumerate(node_ids):
        if node not in by_node:
            nodes.append(node)
            by_node[node] = []
        by_node[node].append(i)
    out = []
    for node in nodes:
        actors = by_node[node]
        for local_rank, actor in enumerate(actors):
            out.append({"actor": actor, "rank": len(out), "size": len(node_ids),
                        "local_rank": local_rank, "local_size": len(actors),
                        "node_id": node})
    for slot in out:
        same = [s for s in out if s["local_rank"] == slot["local_rank"]]
        slot["cross_size"] = len(same)
        slot["cross_rank"] = [s["rank"] for s in same].index(slot["rank"])
    return out


def visible_devices(slots, gpu_ids, per_worker):
    """CUDA_VISIBLE_DEVICES of each rank (rank order) from the GPU ids Ray
    gave each rank's actor (gpu_ids[rank], a list of str).

    Every worker of a node sees the GPUs of all the node's workers, joined
    in local-rank order, so that CUDA can use peer access between them (as
    horovod.ray's colocated strategy does) and device index
    local_rank * per_worker is the worker's own first GPU. Raises
    RuntimeError when Ray gave a worker the wrong count or two workers of a
    node the same GPU."""
    by_node = {}
    for s in slots:
        ids = [str(g) for g in gpu_ids[s["rank"]]]
        if len(ids) != per_worker:
            raise RuntimeError("plait.ray: Ray gave rank %d %d GPU(s) %s, not the %d asked for"
                               % (s["rank"], len(ids), ids, per_worker))
        by_node.setdefault(s["node_id"], []).extend(ids)
    for node, ids in by_node.items():
        if len(set(ids)) != len(ids):
            raise RuntimeError("plait.ray: Ray gave two workers of node %s the same GPU: %s"
                               % (node[:12], ids))
    return [",".join(by_node[s["node_id"]]) for s in slots]
