"""A plait.torch script started by Horovod's own launcher: `horovodrun -np 2
-H localhost:2 --gloo` with a horovodrun flag, as a Horovod user types it.
libplait takes horovodrun's HOROVOD_* variables (docs/configuration.md,
"Horovod's variables"): the ranks find each other through
HOROVOD_GLOO_RENDEZVOUS_ADDR/PORT, and --fusion-threshold-mb 0 (which
horovodrun turns into HOROVOD_FUSION_THRESHOLD=0) must leave every tensor
unfused in plait.stats(), where 64 fuses them.

Needs Horovod 0.28.1's horovodrun, as ci/lib/horovod.sh builds it (into
$PLAIT_CI_VENV_DIR or ~/.cache/plait/venvs/horovod); skipped when it is not
there.
"""

import os
import secrets
import subprocess
import sys

import pytest

VENVS = os.environ.get("PLAIT_CI_VENV_DIR") or os.path.join(
    os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "plait", "venvs")
HOROVODRUN = os.path.join(VENVS, "horovod", "bin", "horovodrun")

SCRIPT = r"""
import torch
import plait.torch as hvd
hvd.init()
assert hvd.size() == 2, hvd.size()
hvd.barrier()
hvd.stats_reset()
hs = [hvd.allreduce_async(torch.ones(1024), op=hvd.Sum, name="t%d" % i) for i in range(40)]
for h in hs:
    assert hvd.synchronize(h).eq(2).all()
s = hvd.stats()
print("RANK %d RESPONSES %d FUSED %d" % (hvd.rank(), s["responses"], s["fused_responses"]),
      flush=True)
hvd.shutdown()
"""


def run_under_horovodrun(tmp_path, fusion_mb):
    script = tmp_path / "script.py"
    script.write_text(SCRIPT)
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("PLAIT_", "HOROVOD_"))
           or k in ("PLAIT_LIBRARY", "PLAIT_PLUGIN_PATH")}
    # horovodrun makes no secret for the ranks; it passes its environment on
    env["PLAIT_SECRET"] = secrets.token_hex(32)
    p = subprocess.run([HOROVODRUN, "-np", "2", "-H", "localhost:2", "--gloo",
                        "--fusion-threshold-mb", str(fusion_mb), "--cycle-time-ms", "50",
                        sys.executable, str(script)],
                       env=env, capture_output=True, text=True, timeout=300, cwd=str(tmp_path))
    assert p.returncode == 0, p.stdout + p.stderr
    counts = {}
    for line in p.stdout.splitlines():
        if "RANK " in line:
            words = line.split("RANK ", 1)[1].split()
            counts[int(words[0])] = (int(words[2]), int(words[4]))
    assert sorted(counts) == [0, 1], p.stdout
    return counts


@pytest.mark.skipif(not os.access(HOROVODRUN, os.X_OK),
                    reason="no Horovod 0.28.1 horovodrun at %s (ci/lib/horovod.sh builds it)"
                    % HOROVODRUN)
def test_horovodrun_starts_plait_and_its_fusion_flag_takes_effect(tmp_path):
    off = run_under_horovodrun(tmp_path, 0)
    assert all(c == (40, 0) for c in off.values()), off
    on = run_under_horovodrun(tmp_path, 64)
    assert all(r < 40 and f > 0 for r, f in on.values()), on
