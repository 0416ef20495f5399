"""Two-process torch.distributed (gloo on 127.0.0.1) DDP training over
sluice.torch.DataLoader's rank sharding: a tiny model wrapped in
DistributedDataParallel trains 2 epochs; every sample is seen exactly once
per epoch across the two ranks, both ranks take the same number of batches
(DDP's collectives need that, also for a dataset that does not divide
evenly), the loss stays finite and the ranks end with the same weights.

The test starts this file twice as a worker (`python test_ddp.py --worker
RANK PORT OUT`), each with a deadline; both are killed if either hangs.
Each image of the synthetic dataset is its own class, so a label names one
sample. Skips with the reason where torch, gloo or sluice is missing or
gloo cannot initialise here."""
import json
import math
import os
import socket
import subprocess
import sys
import time

N, B, S, EPOCHS, SEED = 33, 4, 16, 2, 7  # 33 % 2 != 0: ranks 17 / 16
NO_GLOO = 3  # a worker's exit status when gloo cannot initialise


def _worker(rank, port, out):
    import datetime

    import torch
    import torch.distributed as dist
    import sluice.torch

    try:
        dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}",
                                rank=rank, world_size=2,
                                timeout=datetime.timedelta(seconds=60))
    except Exception as e:
        print(f"gloo cannot initialise: {type(e).__name__}: {e}", flush=True)
        sys.exit(NO_GLOO)
    torch.manual_seed(0)  # DDP also broadcasts rank 0's weights
    torch.set_num_threads(1)
    model = torch.nn.parallel.DistributedDataParallel(torch.nn.Sequential(
        torch.nn.Flatten(), torch.nn.Linear(3 * S * S, N)))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    # rank / world_size come from torch.distributed (the defaults).
    dl = sluice.torch.DataLoader(source=os.environ["SL_DDP_DATA"], batch_size=B,
                                 image_size=S, seed=SEED, num_workers=1)
    assert (dl.rank, dl.world_size) == (rank, 2)
    report = {"epochs": []}
    for epoch in range(EPOCHS):
        dl.set_epoch(epoch)
        labels, sizes, losses = [], [], []
        for x, y in dl:
            loss = torch.nn.functional.cross_entropy(model(x.float() / 255), y)
            opt.zero_grad()
            loss.backward()  # all-reduces: hangs if the ranks' counts differ
            opt.step()
            labels += y.tolist()
            sizes.append(len(y))
            losses.append(loss.item())
        mine = {"labels": labels, "sizes": sizes, "losses": losses,
                "len": len(dl)}
        every = [None, None]
        dist.all_gather_object(every, mine)
        report["epochs"].append(every)
    params = torch.cat([p.detach().flatten() for p in model.parameters()])
    every = [None, None]
    dist.all_gather_object(every, params.tolist())
    report["same_weights"] = every[0] == every[1]
    dist.destroy_process_group()
    if rank == 0:
        with open(out, "w") as f:
            json.dump(report, f)


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


if __name__ == "__main__" and sys.argv[1:2] == ["--worker"]:
    _worker(int(sys.argv[2]), int(sys.argv[3]), sys.argv[4])
    sys.exit(0)

import pytest  # noqa: E402

from conftest import PYDIR, synthetic_folder  # noqa: E402
pytest.importorskip("sluice", reason="sluice module not built")
torch = pytest.importorskip("torch", reason="torch is not installed")


def test_ddp_two_ranks_see_every_sample_once(tmp_path_factory, tmp_path):
    import torch.distributed as dist
    if not (dist.is_available() and dist.is_gloo_available()):
        pytest.skip("torch.distributed with the gloo backend is not available")
    data = synthetic_folder(tmp_path_factory, "ddp", N, N)  # label = sample
    env = dict(os.environ, SL_DDP_DATA=data, OMP_NUM_THREADS="1")
    env.setdefault("GLOO_SOCKET_IFNAME", "lo")  # 127.0.0.1's interface
    env["PYTHONPATH"] = os.pathsep.join(
        p for p in (PYDIR, os.path.dirname(__file__), env.get("PYTHONPATH")) if p)
    out = str(tmp_path / "report.json")
    port = _free_port()
    procs = [subprocess.Popen([sys.executable, __file__, "--worker", str(r),
                               str(port), out], env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True)
             for r in (0, 1)]
    deadline = time.monotonic() + 120
    logs = []
    try:
        for p in procs:
            logs.append(p.communicate(timeout=max(1, deadline - time.monotonic()))[0])
    except subprocess.TimeoutExpired:
        pytest.fail("the DDP workers did not finish in 120 s (a rank waiting "
                    "in a collective: unequal batch counts?)")
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    codes = [p.returncode for p in procs]
    if NO_GLOO in codes:
        reason = next(l for l, c in zip(logs, codes) if c == NO_GLOO).strip()
        print(f"SKIP: {reason}")
        pytest.skip(reason.splitlines()[-1] if reason else "gloo cannot initialise")
    assert codes == [0, 0], "\n".join(logs)
    with open(out) as f:
        report = json.load(f)

    orders = []
    for every in report["epochs"]:
        r0, r1 = every
        # Equal batch counts, as len() says; 17 and 16 samples.
        assert len(r0["sizes"]) == len(r1["sizes"]) == r0["len"] == r1["len"] == 5
        assert (sum(r0["sizes"]), sum(r1["sizes"])) == (17, 16)
        assert min(r0["sizes"] + r1["sizes"]) >= 1
        # Every sample exactly once across the ranks.
        seen = r0["labels"] + r1["labels"]
        assert sorted(seen) == list(range(N)), seen
        assert not set(r0["labels"]) & set(r1["labels"])
        assert all(math.isfinite(v) for r in every for v in r["losses"])
        orders.append(seen)
    assert orders[0] != orders[1]  # a new shuffle each epoch
    assert report["same_weights"]  # DDP kept the replicas equal
