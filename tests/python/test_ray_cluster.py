"""sluice.ray.DataLoader on a simulated multi-node Ray cluster
(ray.cluster_utils.Cluster: a head node and one worker node, 1 CPU each,
separate raylets on this machine): SPREAD places the actors on both nodes,
the stream equals the local loader's digest for digest, and when the
worker node is removed mid-epoch (cluster.remove_node: its raylet and its
actors' processes gone) its unfinished batches are prepared on the head
node, nothing lost or duplicated; partition=True across the two nodes:
each caches its part and serves the other. An actor's node is read from its process:
a Ray worker process is its node's raylet's child. Skips with the reason
when Ray (or torch) is not importable or the cluster cannot start."""
import pytest

from conftest import synthetic_folder
from ray_helpers import B, S, SEED, digests, local_digests, multinode_cluster, ray, sluice  # noqa: F401

# Half a CPU each: two actors per 1-CPU node fit; SPREAD puts them apart.
SPREAD = {"num_cpus": 0.5, "scheduling_strategy": "SPREAD"}


@pytest.fixture(scope="module")
def cluster():
    with multinode_cluster(workers=1, cpus=1) as (c, nodes):
        yield c, nodes[0]


@pytest.fixture(scope="module")
def ds(tmp_path_factory):
    return synthetic_folder(tmp_path_factory, "raycl", 120, 3)  # 15 batches


@pytest.fixture(scope="module")
def local(ds):
    return local_digests(ds, 2)


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


def test_partitioned_cache_across_nodes(cluster, ds, local):
    """partition=True with the actors on two nodes (SPREAD): each caches
    its part and serves it to the other across the nodes' object stores;
    the second epoch reads nothing from storage, half its samples remote
    hits from the other node; the stream is the local loader's."""
    c, _ = cluster  # before the test that removes the worker node
    L = sluice.Loader(ds, B, S)
    part = sum(len(L.read_sample(i, False)[0]) for i in range(0, 120, 2))
    with sluice.ray.DataLoader(ds, B, S, seed=SEED, num_actors=2, actor_options=SPREAD,
                               partition=True, cache_bytes=2 * part,
                               cache_codec="none") as dl:
        assert sorted(_nodes_of(c, dl)) == ["head", "worker"]
        assert digests(dl) == local[0]
        assert digests(dl) == local[1]
        st = dl.cache_stats()
        ep = st["by_epoch"]
        assert ep[0]["storage_reads"] + ep[1]["storage_reads"] == 120, ep
        assert ep[1]["remote_hits"] > 0 and ep[1]["remote_bytes"] > 0
        assert ep[1]["fallback_reads"] == 0
        assert sorted(a["part"] for a in st["per_actor"]) == [0, 1]


def test_actors_on_both_nodes_and_node_lost(cluster, ds, local):
    c, worker = cluster
    # chunk 2: less than an epoch ahead, so the lost node takes batches
    # not yet prepared (fetched ones are the trainer's already)
    with sluice.ray.DataLoader(ds, B, S, seed=SEED, num_actors=2, chunk=2,
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

