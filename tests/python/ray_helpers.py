"""What the Ray tests (test_ray*.py) share: the built sluice package on the
path of this process and of the actors' (PYTHONPATH), the imports skipped
with their reason, a local cluster of our own, a simulated multi-node
cluster (ray.cluster_utils.Cluster), the local loader's digests.

A test module does `from ray_helpers import *` after nothing else of
sluice or Ray: the module-level skips happen here, at its import."""
import contextlib
import glob
import hashlib
import os
import shutil

import pytest

from conftest import PYDIR  # noqa: E402  (this build's package)
sluice = pytest.importorskip("sluice", reason="sluice module not built")
ray = pytest.importorskip("ray", reason="Ray is not installed or cannot be imported (pip install ray)",
                         exc_type=ImportError)
torch = pytest.importorskip("torch", reason="torch is not installed")
import sluice.ray  # noqa: E402
import sluice.torch  # noqa: E402

B, S, SEED = 8, 32, 11

__all__ = ["B", "S", "SEED", "PYDIR", "sluice", "ray", "torch", "digests",
           "local_cluster", "multinode_cluster", "local_digests", "damaged_copy"]


@contextlib.contextmanager
def _actor_path():
    """PYTHONPATH with the package's folder while a cluster runs: the
    actors (and job processes) import sluice."""
    saved = os.environ.get("PYTHONPATH")
    if PYDIR:
        os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (PYDIR, saved) if p)
    try:
        yield
    finally:
        if saved is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = saved


@contextlib.contextmanager
def local_cluster(num_cpus=2):
    """A local cluster of our own (address="local": never one another
    process started on this machine), stopped at the end; yields its GCS
    address (for other driver processes). Skips when Ray cannot start."""
    with _actor_path():
        try:
            ctx = ray.init(address="local", num_cpus=num_cpus,
                           include_dashboard=False, log_to_driver=False,
                           _node_ip_address="127.0.0.1")
        except Exception as e:  # no shared memory, no ports, ...
            pytest.skip(f"Ray cannot start here: {e}")
        try:
            yield ctx.address_info["gcs_address"]
        finally:
            ray.shutdown()


# A lost node is noticed in about a second, not 30.
FAST_HEALTH = {"health_check_period_ms": 300, "health_check_failure_threshold": 3}


@contextlib.contextmanager
def multinode_cluster(workers=1, cpus=1):
    """ray.cluster_utils.Cluster: a head node and `workers` worker nodes
    (separate raylets on this machine), `cpus` CPUs each; yields (cluster,
    [worker nodes]). Skips when the cluster cannot start."""
    from ray.cluster_utils import Cluster
    with _actor_path():
        c = None
        try:
            c = Cluster(initialize_head=True,
                        head_node_args={"num_cpus": cpus, "include_dashboard": False,
                                        "_system_config": FAST_HEALTH})
            nodes = [c.add_node(num_cpus=cpus) for _ in range(workers)]
            c.wait_for_nodes()
            ray.init(address=c.address, log_to_driver=False)
        except Exception as e:  # no shared memory, no ports, ...
            if c is not None:
                c.shutdown()
            pytest.skip(f"a Ray cluster cannot start here: {e}")
        try:
            yield c, nodes
        finally:
            ray.shutdown()
            c.shutdown()


def digests(batches):
    return [hashlib.sha1(x.numpy().tobytes() + y.numpy().tobytes()).hexdigest()
            for x, y in batches]


def local_digests(ds, epochs, **kw):
    """The local loader's (sluice.torch.DataLoader) digests per epoch."""
    dl = sluice.torch.DataLoader(source=ds, batch_size=B, image_size=S,
                                 seed=SEED, num_workers=1, **kw)
    return [digests(dl) for _ in range(epochs)]


def damaged_copy(ds, dst):
    """ds copied to dst with two files damaged (empty, not an image)."""
    shutil.copytree(ds, dst)
    files = sorted(glob.glob(os.path.join(dst, "*", "*")))
    open(files[3], "w").close()
    with open(files[17], "wb") as f:
        f.write(b"not an image" * 10)
    return str(dst)
