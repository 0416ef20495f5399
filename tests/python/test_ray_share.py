"""Coordinated prep (sluice.ray.DataLoader(..., share=...)) on a local Ray
cluster started here: jobs in separate processes (share_job.py, drivers of
this cluster) attached to one preparer group each receive every batch,
digest-equal to a lone local loader's stream, and each batch is prepared
once (the group's per-epoch count is the epoch's batch count, not times
the jobs); a late job joins at the next epoch (join="now": at the slowest
job's batch); a job that leaves early, one killed (dropped when its
life line ends) and one silent (dropped after its lease) do not stop the
others. Skips with the reason when Ray cannot start. Small data: a
shared 2-core machine."""
import gc
import json
import os
import signal
import subprocess
import sys
import threading
import time

import pytest

from conftest import synthetic_folder
from ray_helpers import (B, S, SEED, damaged_copy, digests, local_cluster,  # noqa: F401
                         local_digests, ray, sluice)

NB = 15
SMALL = {"num_cpus": 0.5}
JOB = os.path.join(os.path.dirname(os.path.abspath(__file__)), "share_job.py")


@pytest.fixture(scope="module")
def cluster():
    """A cluster of our own; its address for the job processes."""
    with local_cluster() as address:
        yield address


@pytest.fixture(scope="module")
def ds(tmp_path_factory):
    return synthetic_folder(tmp_path_factory, "share", 120, 3)  # 15 batches


@pytest.fixture(scope="module")
def local(ds):
    """A lone local loader's first three epochs."""
    return local_digests(ds, 3)


class Jobs:
    """Job processes, all killed at the end whatever happened."""

    def __init__(self, address, ds, tmp):
        self.address, self.ds, self.tmp, self.procs = address, ds, tmp, {}

    def start(self, name, **spec):
        spec = dict(spec, address=self.address, source=self.ds,
                    out=str(self.tmp / f"{name}.json"))
        self.procs[name] = subprocess.Popen(
            [sys.executable, JOB, json.dumps(spec)],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)

    def result(self, name, timeout=150):
        p = self.procs[name]
        out, _ = p.communicate(timeout=timeout)
        assert p.returncode == 0, f"job {name} failed:\n{out[-3000:]}"
        with open(self.tmp / f"{name}.json") as f:
            return json.load(f)

    def kill_all(self):
        for p in self.procs.values():
            if p.poll() is None:
                p.kill()
                p.wait()


@pytest.fixture
def jobs(cluster, ds, tmp_path):
    j = Jobs(cluster, ds, tmp_path)
    yield j
    j.kill_all()


def wait_for(cond, what, timeout=90):
    t0 = time.monotonic()
    while not cond():
        assert time.monotonic() - t0 < timeout, f"timed out waiting for {what}"
        time.sleep(0.05)


def counts(res):
    return {int(k): v for k, v in res["stats"]["group"]["prepared_per_epoch"].items()}


def test_two_loaders_one_process(cluster, ds, local):
    """Two jobs in one process, taking turns: the same streams as a lone
    loader, each batch prepared once; a second group name with other
    options is refused with what differs."""
    kw = dict(seed=SEED, num_actors=2, chunk=2, actor_options=SMALL, share="inproc")
    a = sluice.ray.DataLoader(ds, B, S, **kw)
    b = sluice.ray.DataLoader(ds, B, S, **kw)
    try:
        with pytest.raises(ValueError, match="seed: group 11, this job 12"):
            sluice.ray.DataLoader(ds, B, S, **dict(kw, seed=12))
        for e in range(2):
            got_a, got_b = [], []
            for x, y in zip(a, b):
                got_a.append(x)
                got_b.append(y)
            assert digests(got_a) == local[e] and digests(got_b) == local[e]
        g = a.group_stats()
        assert g["jobs"] == 2 and g["reprepared"] == 0
        assert g["prepared_per_epoch"][0] == NB and g["prepared_per_epoch"][1] == NB
        # A job asks when fewer than half the window's batches are known
        # ahead: about NB / (window / 2) calls an epoch (19 in all here,
        # 4.75 a job-epoch), not NB (one per batch: 60 or more); the
        # slack: the ask at an epoch's start, and asks while the other job,
        # not heard yet, holds the hand-out back.
        per_job_epoch = g["wants"] / (2 * 2)
        assert per_job_epoch <= NB / (g["window"] // 2) + 3, g
        # Resume per job: b goes back to (1, 4) and gets the rest of epoch
        # 1 again (those batches were released: prepared again), and says
        # so once (it was silent: a late job's set_epoch(0) made every
        # batch twice).
        a.close()
        b.load_state_dict(dict(b.state_dict(), epoch=1, batch=4))
        with pytest.warns(RuntimeWarning, match=r"epoch 1 batch 4\) asks for \d+ batches "
                          "the group had released") as w:
            assert digests(b) == local[1][4:]
        assert sum("had released" in str(x.message) for x in w) == 1
        assert b.group_stats()["reprepared"] >= NB - 4
    finally:
        a.close()
        b.close()


def test_in_place_op_stays_in_its_job(cluster, ds, local):
    """A job's in-place op on its batches (x.mul_(0)) does not alter the
    batches another job of the group receives: a share job's images are
    its own copies (they were read-only object-store views, wrapped
    writable by torch.from_numpy: b received a's zeros)."""
    kw = dict(seed=SEED, num_actors=2, chunk=4, actor_options=SMALL, share="inplace")
    a = sluice.ray.DataLoader(ds, B, S, **kw)
    b = sluice.ray.DataLoader(ds, B, S, **kw)
    try:
        ia, ib = iter(a), iter(b)  # both at batch 0: the same objects
        got_a = []
        for _ in range(6):
            x, y = next(ia)
            got_a.append(digests([(x, y)])[0])
            x.mul_(0)
        got_b = digests(next(ib) for _ in range(6))
        assert got_a == local[0][:6] and got_b == local[0][:6]
        del ia, ib
    finally:
        a.close()
        b.close()


def test_deleted_loader_leaves(cluster, ds, local, tmp_path):
    """A job whose loader is deleted without close() (del, collected)
    leaves the group at once, and the other job runs on. Its heartbeat
    thread (and its telemetry's) held it: alive, it held the group's pace
    at its position for ever (the lease never ran out)."""
    kw = dict(seed=SEED, num_actors=2, chunk=2, actor_options=SMALL, share="deleted")
    a = sluice.ray.DataLoader(ds, B, S, telemetry_path=tmp_path / "a.jsonl", **kw)
    b = sluice.ray.DataLoader(ds, B, S, **kw)
    try:
        for _ in zip(a, b):
            pass
        del a
        gc.collect()
        wait_for(lambda: b.group_stats()["jobs"] == 1, "a to leave", timeout=10)
        assert b.group_stats()["jobs_left"] == 1
        assert [digests(b) for _ in range(2)] == local[1:3]
    finally:
        b.close()


def test_failed_start_raises_and_frees_the_name(cluster, ds, local, tmp_path):
    """A group whose preparers cannot start (a missing source) raises their
    error at once, as a lone loader does, and ends: the name then serves a
    job that can start them (it raised "cannot attach" after 50 tries and
    the dead group kept the name)."""
    kw = dict(seed=SEED, num_actors=1, actor_options=SMALL, share="failed")
    t0 = time.monotonic()
    with pytest.raises(sluice.NotFoundError, match="a preparer could not start"):
        sluice.ray.DataLoader(str(tmp_path / "missing"), B, S, **kw)
    assert time.monotonic() - t0 < 30
    with sluice.ray.DataLoader(ds, B, S, **kw) as dl:
        assert digests(dl) == local[0]


def test_group_skipped_and_cache_stats(cluster, ds, tmp_path):
    """A share job's skipped() and cache_stats() are its group preparers'
    (cache_stats was all zeros; skipped() did not exist); partition= is
    refused with share= (it was silently ignored)."""
    dmg = damaged_copy(ds, tmp_path / "dmg")
    kw = dict(seed=SEED, num_actors=2, chunk=2, actor_options=SMALL,
              on_error="skip", cache_bytes=16 << 20)
    with pytest.raises(ValueError, match="share= and partition="):
        sluice.ray.DataLoader(dmg, B, S, share="cached", partition=True, **kw)
    with sluice.ray.DataLoader(dmg, B, S, share="cached", **kw) as dl:
        for _ in dl:
            pass
        got = dl.skipped()
        assert sum(m.startswith("epoch 0: ") for m in got) == 2
        assert len(got) == len(set(got))
        c = dl.cache_stats()
        assert c["by_epoch"][0]["storage_reads"] > 0 and c["entries"] > 0, c


def test_share_name_per_rank(cluster, ds):
    """share="NAME" across ranks (Ray Train's workers): a group per rank,
    each rank's stream (one group refused the second rank: "prepares
    other batches: rank: group 0, this job 1")."""
    kw = dict(seed=SEED, num_actors=1, actor_options=SMALL, share="ranks", world_size=2)
    a = sluice.ray.DataLoader(ds, B, S, rank=0, **kw)
    b = sluice.ray.DataLoader(ds, B, S, rank=1, **kw)
    try:
        assert digests(a) == local_digests(ds, 1, rank=0, world_size=2)[0]
        assert digests(b) == local_digests(ds, 1, rank=1, world_size=2)[0]
    finally:
        a.close()
        b.close()


def test_jobs_resumed_elsewhere(cluster, ds, local):
    """Jobs that attach and then move to epoch 2 (as a resume does) get
    epoch 2, and nothing of epochs 0 and 1 is prepared."""
    kw = dict(seed=SEED, num_actors=2, actor_options=SMALL, share="resumed")
    a = sluice.ray.DataLoader(ds, B, S, **kw)
    b = sluice.ray.DataLoader(ds, B, S, **kw)
    try:
        a.set_epoch(2)
        b.load_state_dict(dict(b.state_dict(), epoch=2, batch=0))
        got_a, got_b = [], []
        for x, y in zip(a, b):
            got_a.append(x)
            got_b.append(y)
        assert digests(got_a) == local[2] and digests(got_b) == local[2]
        per = a.group_stats()["prepared_per_epoch"]
        assert per[2] == NB and 0 not in per and 1 not in per, per
    finally:
        a.close()
        b.close()


# A batch's bytes in the object store: B uint8 images, B int64 labels.
BATCH_BYTES = B * 3 * S * S + B * 8


def test_object_store_bytes_bounds_the_group(cluster, ds, local, tmp_path):
    """object_store_bytes bounds what the group holds in the object store
    past its slowest job: in the second epoch (the first hand-out, before
    a chunk was done, and the jobs' positions heard up to half a window
    late are behind), at most 5 batches held (handed out, not released),
    not the count window's 2 preparers x depth 2 x chunk 2 = 8. Both
    jobs' streams are the lone loader's, each batch prepared once; the
    group's replies tell the window in batches and the budget, and a
    job's telemetry says that the budget held the preparers back."""
    kw = dict(seed=SEED, num_actors=2, chunk=2, actor_options=SMALL, share="bytes",
              object_store_bytes=5 * BATCH_BYTES)
    a = sluice.ray.DataLoader(ds, B, S, telemetry_path=tmp_path / "a.jsonl", **kw)
    b = sluice.ray.DataLoader(ds, B, S, **kw)
    try:
        held = []
        for e in range(2):
            got_a, got_b = [], []
            for x, y in zip(a, b):
                got_a.append(x)
                got_b.append(y)
                held.append(a.group_stats()["held"])
                time.sleep(0.03)  # the preparers fill what the window allows
            assert digests(got_a) == local[e] and digests(got_b) == local[e]
        assert max(held[NB:]) <= 5, held
        assert max(held) >= 4, held  # the budget is used, not starved
        g = a.group_stats()
        assert (g["window"], g["window_batches"], g["batch_bytes"],
                g["object_store_bytes"]) == (5, 8, BATCH_BYTES, 5 * BATCH_BYTES), g
        assert g["budget_held"] > 0 and g["reprepared"] == 0, g
        assert g["prepared_per_epoch"][0] == NB and g["prepared_per_epoch"][1] == NB, g
        assert a.object_store_bytes == 5 * BATCH_BYTES
    finally:
        a.close()
        b.close()
    last = json.loads((tmp_path / "a.jsonl").read_text().splitlines()[-1])["ray"]
    assert (last["window"], last["object_store_bytes"], last["batch_bytes"]) == \
        (5, 5 * BATCH_BYTES, BATCH_BYTES), last
    assert last["budget_held_total"] > 0, last


def test_object_store_bytes_below_a_chunk_per_preparer(cluster, ds, local):
    """A budget under one chunk per preparer (1 byte) never narrows the
    group's window below that (2 preparers x chunk 2 = 4), so it cannot
    deadlock: the epoch completes, the lone loader's stream."""
    kw = dict(seed=SEED, num_actors=2, chunk=2, actor_options=SMALL,
              share="bytes-tiny", object_store_bytes=1)
    with sluice.ray.DataLoader(ds, B, S, **kw) as dl:
        assert digests(dl) == local[0]
        g = dl.group_stats()
        assert g["window"] == 4 and g["prepared_per_epoch"][0] == NB, g


def test_three_jobs_prepare_once(jobs, local, tmp_path):
    """Three job processes, two epochs each: every job's stream is the lone
    loader's, and each batch was prepared once for all of them."""
    names = ["j0", "j1", "j2"]
    go = str(tmp_path / "go")
    for n in names:
        jobs.start(n, share="three", epochs=2, ready=str(tmp_path / f"{n}.ready"), go=go)
    wait_for(lambda: all(os.path.exists(tmp_path / f"{n}.ready") for n in names),
             "the jobs to attach")
    open(go, "w").close()
    res = [jobs.result(n) for n in names]
    for r in res:
        assert r["start"] == [0, 0]
        assert r["epochs"] == local[:2]
        assert r["state"]["epoch"] == 2 and r["state"]["batch"] == 0
    c = counts(res[0])
    assert c[0] == NB and c[1] == NB  # once, not 3 x NB
    g = res[0]["stats"]["group"]
    assert g["reprepared"] == 0 and g["jobs_attached"] == 3


def test_late_join_and_early_leave(jobs, local, tmp_path):
    """a runs two epochs, pausing after 3 batches; c leaves after 5; b
    attaches while a is inside epoch 0 (paused) and starts at epoch 1's
    first batch; d attaches with join="now" and starts at the slowest
    job's batch. Every
    stream is the lone loader's from where it started; no batch prepared
    twice."""
    go, prog = str(tmp_path / "go"), str(tmp_path / "a.progress")
    resume = str(tmp_path / "resume")
    jobs.start("a", share="late", epochs=2, sleep=0.05, progress=prog,
               pause_at=3, resume=resume, ready=str(tmp_path / "a.ready"), go=go)
    jobs.start("c", share="late", epochs=2, leave_after=5,
               ready=str(tmp_path / "c.ready"), go=go)
    wait_for(lambda: os.path.exists(tmp_path / "a.ready") and
             os.path.exists(tmp_path / "c.ready"), "a and c to attach")
    open(go, "w").close()

    def taken():
        try:
            with open(prog) as f:
                return int(f.read() or 0)
        except FileNotFoundError:
            return 0
    wait_for(lambda: taken() >= 3, "a's third batch")
    jobs.start("b", share="late", epochs=1, ready=str(tmp_path / "b.ready"))
    jobs.start("d", share="late", epochs=1, join="now", ready=str(tmp_path / "d.ready"))
    wait_for(lambda: os.path.exists(tmp_path / "b.ready") and
             os.path.exists(tmp_path / "d.ready"), "b and d to attach")
    open(resume, "w").close()
    a, b, c, d = (jobs.result(n) for n in "abcd")
    assert a["start"] == [0, 0] and a["epochs"] == local[:2]
    assert c["epochs"] == [local[0][:5]]
    assert c["state"]["epoch"] == 0 and c["state"]["batch"] == 5
    assert b["start"] == [1, 0]  # the next epoch's first batch
    assert b["epochs"] == [local[1]]
    e, k = d["start"]  # a's position (3 or 4: a may have asked for the next)
    assert e == 0 and k in (3, 4), d["start"]
    assert d["epochs"] == [local[0][k:]]
    c_ = counts(a)
    assert c_[0] == NB and c_[1] == NB and a["stats"]["group"]["reprepared"] == 0
    ev = " | ".join(w for _, w in b["stats"]["group"]["events"])
    assert " left" in ev and "attached at epoch 1 batch 0" in ev, ev


def _other_job_stops(jobs, ds, tmp_path, share, sig, **lease):
    """This process's job (its group's creator) and job v in another
    process; v takes a batch and gets sig. This job's epoch (held by v
    until v is dropped) and its group's events."""
    prog = str(tmp_path / "v.progress")
    a = sluice.ray.DataLoader(ds, B, S, seed=SEED, num_actors=2, chunk=2,
                              actor_options=SMALL, share=share, **lease)
    try:
        jobs.start("v", share=share, epochs=1, sleep=0.2, progress=prog,
                   ready=str(tmp_path / "v.ready"), go=str(tmp_path / "go"), **lease)
        wait_for(lambda: os.path.exists(tmp_path / "v.ready"), "v to attach")
        it = iter(a)
        got = [next(it)]  # a's position is known: v is held within a window
        open(tmp_path / "go", "w").close()
        wait_for(lambda: os.path.exists(prog), "v's first batch")
        jobs.procs["v"].send_signal(sig)
        try:
            got += list(it)
        finally:
            jobs.procs["v"].send_signal(signal.SIGCONT)
        return digests(got), a.group_stats()
    finally:
        a.close()


def test_killed_job_is_dropped(jobs, ds, local, tmp_path):
    """A job killed mid-epoch is dropped once its process's life line
    ends, not after its lease (30 s here: the event says which), and the
    other job runs on, its stream whole."""
    got, g = _other_job_stops(jobs, ds, tmp_path, "kill", signal.SIGKILL)
    assert got == local[0]
    ev = " | ".join(w for _, w in g["events"])
    assert "dropped (its process ended)" in ev, ev
    assert g["jobs_dropped"] == 1


def test_silent_job_is_dropped_after_its_lease(jobs, ds, local, tmp_path):
    """A job that stops pinging (its heartbeat stopped, its process alive:
    SIGSTOP) is dropped after its lease, and the other job runs on."""
    got, g = _other_job_stops(jobs, ds, tmp_path, "stop", signal.SIGSTOP, lease=2.0)
    assert got == local[0]
    ev = " | ".join(w for _, w in g["events"])
    assert "dropped (silent" in ev, ev


def test_unplaced_group_warns_and_ends_with_its_job(jobs, tmp_path):
    """A job whose group cannot place a preparer (a resource the cluster
    lacks) warns, naming it, and waits (as a lone loader does); killed
    then, its group ends and frees the name (it hung silently, and the
    group stayed, waiting, for ever)."""
    jobs.start("u", share="unplaced", actor_options={"resources": {"absent": 1}},
               start_warn_s=1.0)
    p = jobs.procs["u"]
    got = []
    t = threading.Thread(target=lambda: got.extend(iter(p.stdout.readline, "")),
                         daemon=True)
    t.start()
    wait_for(lambda: any("could not be placed" in x for x in got), "the warning",
             timeout=60)
    msg = next(x for x in got if "could not be placed" in x)
    assert "absent 1" in msg and "The job waits" in msg, msg
    g = ray.get_actor("sluice-share-unplaced", namespace="sluice")
    wait_for(lambda: ray.get(g.stats.remote())["waiting"], "the job's wait in the group")
    p.kill()
    p.wait()

    def gone():
        try:
            g = ray.get_actor("sluice-share-unplaced", namespace="sluice")
            ray.get(g.stats.remote(), timeout=10)
            return False
        except (ValueError, ray.exceptions.RayActorError):  # no name, or dead
            return True
    wait_for(gone, "the group to end", timeout=30)
