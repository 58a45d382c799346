"""What plait's coordinator did, as a few lines of text: shared by the
PyTorch examples (torch_train.py, torch_synthetic_benchmark.py) and
bench/torch_bench.py.

    import plait
    plait.stats_reset()
    ... run `steps` training steps ...
    for line in fusion_report(plait.stats(), steps):
        print(line)

plait.stats() counts what this rank's coordinator did since init (or the last
stats_reset()): collectives run ("responses"), the tensors in them, how many
collectives were fused and how full their fusion buffer was, control-plane
traffic, and the seconds spent negotiating, copying into the fusion buffer,
in the transport and copying out (docs/coordinator.md, "Measuring").
"""


def _ratio(a, b):
    return a / b if b else 0.0


def fusion_report(s, steps=1, unit="step"):
    """Lines describing stats dict s (from plait.stats()) over `steps` steps."""
    steps = max(int(steps), 1)
    resp = s["responses"]
    lines = [
        "collectives (responses): %.1f per %s, %.1f tensors each on average "
        "(%d tensors, %.1f MiB in all)"
        % (resp / steps, unit, _ratio(s["tensors"], resp), s["tensors"],
           s["bytes"] / 2**20),
        "fused collectives: %d of %d, %.1f tensors and %.2f MiB each; fusion buffer "
        "fill %.1f%% (fusion_bytes / fusion_capacity = %.1f MiB / %.1f MiB)"
        % (s["fused_responses"], resp,
           _ratio(s["fused_tensors"], s["fused_responses"]),
           _ratio(s["fusion_bytes"], s["fused_responses"]) / 2**20,
           100.0 * _ratio(s["fusion_bytes"], s["fusion_capacity"]),
           s["fusion_bytes"] / 2**20, s["fusion_capacity"] / 2**20),
        "response cache: %d hits, %d misses; control plane: %.0f bytes and "
        "%.1f messages per %s; %d busy cycles of %d"
        % (s["cache_hits"], s["cache_misses"], s["control_bytes"] / steps,
           s["control_messages"] / steps, unit, s["busy_cycles"], s["cycles"]),
        "coordinator time per %s: negotiate %.2f ms, copy in %.2f ms, "
        "transport %.2f ms, copy out %.2f ms"
        % (unit, 1e3 * s["negotiate_s"] / steps, 1e3 * s["copy_in_s"] / steps,
           1e3 * s["transport_s"] / steps, 1e3 * s["copy_out_s"] / steps),
    ]
    return lines
