"""sluice.ray.DataLoader on a simulated multi-node Ray cluster
(ray.cluster_utils.Cluster: a head node and one worker node, 1 CPU each,
separate raylets on this machine): SPREAD places the actors on both nodes,
the stream equals the local loader's digest for digest, and when the
worker node is removed mid-epoch (cluster.remove_node: its raylet and its
actors' processes gone) its unfinished batches are prepared on the head
node, nothing lost or duplicated. An actor's node is read from its process:
a Ray worker process is its node's raylet's child. Skips with the reason
when Ray (or torch) is not importable or the cluster cannot start."""
import hashlib
import os
import sys

import pytest

from conftest import synthetic_folder

SLUICE = os.environ.get("SLUICE")
PYDIR = os.path.join(os.path.dirname(SLUICE), "python") if SLUICE else None
if PYDIR and os.path.isdir(os.path.join(PYDIR, "sluice")):
    sys.path.insert(0, PYDIR)
sluice = pytest.importorskip("sluice", reason="sluice module not built")
ray = pytest.importorskip("ray", reason="Ray is not installed or cannot be imported (pip install ray)",
                         exc_type=ImportError)
torch = pytest.importorskip("torch", reason="torch is not installed")
import sluice.ray  # noqa: E402
import sluice.torch  # noqa: E402

B, S, SEED = 8, 32, 11
# Half a CPU each: two actors per 1-CPU node fit; SPREAD puts them apart.
SPREAD = {"num_cpus": 0.5, "scheduling_strategy": "SPREAD"}
NODE = {"num_cpus": 1, "include_dashboard": False,
        # A lost node is noticed in about a second, not 30.
        "_system_config": {"health_check_period_ms": 300,
                           "health_check_failure_threshold": 3}}


@pytest.fixture(scope="module")
def cluster():
    from ray.cluster_utils import Cluster
    saved = os.environ.get("PYTHONPATH")  # the actors import sluice
    if PYDIR:
        os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (PYDIR, saved) if p)
    c = None
    try:
        c = Cluster(initialize_head=True, head_node_args=NODE)
        worker = c.add_node(num_cpus=1)
        c.wait_for_nodes()
        ray.init(address=c.address, log_to_driver=False)
    except Exception as e:  # no shared memory, no ports, ...
        if c is not None:
            c.shutdown()
        _restore(saved)
        pytest.skip(f"a Ray cluster cannot start here: {e}")
    yield c, worker
    ray.shutdown()
    c.shutdown()
    _restore(saved)


def _restore(saved):
    if saved is None:
        os.environ.pop("PYTHONPATH", None)
    else:
        os.environ["PYTHONPATH"] = saved


@pytest.fixture(scope="module")
def ds(tmp_path_factory):
    return synthetic_folder(tmp_path_factory, "raycl", 120, 3)  # 15 batches


def digests(batches):
    return [hashlib.sha1(x.numpy().tobytes() + y.numpy().tobytes()).hexdigest()
            for x, y in batches]


@pytest.fixture(scope="module")
def local(ds):
    dl = sluice.torch.DataLoader(source=ds, batch_size=B, image_size=S,
                                 seed=SEED, num_workers=1)
    return [digests(dl) for _ in range(2)]


def _ppid(pid):
    with open(f"/proc/{pid}/stat") as f:
        return int(f.read().rsplit(")", 1)[1].split()[1])


def _nodes_of(c, dl):
    """node name ('head' / 'worker') of each live actor."""
    raylets = {}
    for name, node in (("head", c.head_node), *(("worker", n) for n in c.worker_nodes)):
        raylets[node.all_processes["raylet"][0].process.pid] = name
    pids = ray.get([a.pid.remote() for a in dl.actors()], timeout=60)
    return [raylets.get(_ppid(p), f"?{p}") for p in pids]


def test_actors_on_both_nodes_and_node_lost(cluster, ds, local):
    c, worker = cluster
    with sluice.ray.DataLoader(ds, B, S, seed=SEED, num_actors=2,
                               actor_options=SPREAD) as dl:
        assert sorted(_nodes_of(c, dl)) == ["head", "worker"]
        assert digests(dl) == local[0]
        per = dl.stats()["per_actor"]
        assert len(per) == 2 and all(per.values())  # both nodes worked

        out = []
        for i, b in enumerate(dl):
            out.append(b)
            if i == 2:  # mid-epoch: the worker node and its actor go
                c.remove_node(worker)
        assert digests(out) == local[1]  # nothing lost, nothing twice
        st = dl.stats()
        assert st["actors_failed"] == 1 and st["rehanded_batches"] >= 1, st
        lost = [d for d in st["decisions"] if d["action"] == "lost"]
        assert len(lost) == 1 and "re-handed" in lost[0]["reason"]
        assert st["actors"] == 2  # the replacement, on the head node
        assert _nodes_of(c, dl) == ["head", "head"]
        dl.set_epoch(0)
        assert digests(dl) == local[0]
