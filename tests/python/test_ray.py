"""sluice.ray.DataLoader on a local Ray cluster started here (ray.init,
stopped at the end): the stream equals sluice.torch.DataLoader's, digest
for digest, with 1, 2 and 3 actors; resume, set_epoch, rank sharding;
actors added and removed mid-epoch; an actor killed mid-epoch (ray.kill,
and its process by SIGKILL) loses and duplicates nothing; the autoscale
policy's decisions. Skips with the reason when Ray (or torch) is not
importable or cannot start. Small data: a shared 2-core machine."""
import json
import os
import signal
import threading
import time

import pytest

from conftest import synthetic_folder
from ray_helpers import (B, S, SEED, damaged_copy, digests, local_cluster,  # noqa: F401
                         local_digests, ray, sluice, torch)

SMALL = {"num_cpus": 0.5}  # three actors fit a 2-CPU cluster


@pytest.fixture(scope="module")
def cluster():
    with local_cluster():
        yield


@pytest.fixture(scope="module")
def ds(tmp_path_factory):
    return synthetic_folder(tmp_path_factory, "ray", 120, 3)  # 15 batches


@pytest.fixture(scope="module")
def local(ds):
    """The local loader's digests: two epochs, and rank 1 of 2's first."""
    return local_digests(ds, 2), local_digests(ds, 1, rank=1, world_size=2)[0]


def make(ds, n, **kw):
    return sluice.ray.DataLoader(ds, B, S, seed=SEED, num_actors=n,
                                 actor_options=SMALL, **kw)


@pytest.mark.parametrize("n", [1, 2, 3])
def test_stream_equals_local(cluster, ds, local, n):
    with make(ds, n) as dl:
        assert len(dl) == 15
        # Work goes to started actors only: wait for all n, so that the
        # check below that they shared it does not race their start.
        t0 = time.monotonic()
        while dl.stats()["actors_unplaced"] and time.monotonic() - t0 < 60:
            time.sleep(0.05)
        got = [digests(dl) for _ in range(2)]
        assert got == local[0]
        st = dl.stats()
        assert st["batches"] == 30 and st["actors"] == n
        if n > 1:  # the work was shared
            assert sum(1 for v in st["per_actor"].values() if v) > 1
        # The actors hand Ray their engine's buffers (one copy into the
        # object store); Ray let go of each task's batches, so every plan
        # kept its actor's engine.
        assert [ray.get(h.engines_renewed.remote()) for h in dl.actors()] == [0] * n
        # Exact resume mid-epoch; set_epoch.
        dl.set_epoch(1)
        it = iter(dl)
        first = digests([next(it) for _ in range(4)])
        state = dl.state_dict()
        assert (state["epoch"], state["batch"]) == (1, 4)
        del it
        dl.load_state_dict(state)
        assert first + digests(dl) == local[0][1]


def test_labels_are_copies(cluster, ds):
    """The labels a batch yields are the job's own (tiny) copies: a view
    kept by the caller (labels.append(y)) kept the whole chunk object, its
    images too, in the object store. The images stay read-only views."""
    with make(ds, 1, tensors=False) as dl:
        x, y = next(iter(dl))
        assert y.flags.writeable and y.flags.owndata
        assert not x.flags.writeable


def test_a_superseded_iterator_raises(cluster, ds, local):
    """One DataLoader streams one iteration: a newer iter(), set_epoch or
    load_state_dict ends the live one, whose next next() raises saying so
    (it stopped silently, as if its epoch were done); the new one streams
    its epoch whole."""
    with make(ds, 1) as dl:
        for end in (iter, lambda d: d.set_epoch(0),
                    lambda d: d.load_state_dict(d.state_dict())):
            dl.set_epoch(0)
            it = iter(dl)
            next(it)
            end(dl)
            with pytest.raises(RuntimeError, match="superseded by"):
                next(it)
        # set_epoch of the epoch just loaded, at (0, 1), keeps the position
        dl.set_epoch(0)
        assert digests(dl) == local[0][0][1:]
        dl.set_epoch(0)
        assert digests(dl) == local[0][0]


def test_resume_loop_with_set_epoch(cluster, ds, local):
    """load_state_dict, then the resume loop's set_epoch(ckpt["epoch"]):
    the rest of the loaded epoch (set_epoch started it over, and the
    batches already trained on came again); set_epoch of another epoch
    drops the loaded position, as sluice.torch.DataLoader."""
    with make(ds, 1) as dl:
        dl.set_epoch(0)
        it = iter(dl)
        for _ in range(4):
            next(it)
        ckpt = dl.state_dict()
        del it
        dl.load_state_dict(ckpt)
        dl.set_epoch(0)
        assert digests(dl) == local[0][0][4:]
        dl.load_state_dict(ckpt)
        dl.set_epoch(1)
        assert digests(dl) == local[0][1]


def test_whole_chunks(cluster, ds, local):
    """Tasks carry whole chunks, but where the work handed out ahead stops
    (one epoch past each iteration's end): a free actor slot filled with
    what the window allowed at each take made chunks of 1-3 of 4 (36
    batches in 12 tasks here), each paying a whole task."""
    with make(ds, 2, chunk=4) as dl:
        assert [digests(dl) for _ in range(2)] == local[0]
        st = dl.stats()
        assert st["batches_handed"] >= 4 * st["tasks"] - 3 * 2, st


# A batch's bytes in the object store: B uint8 images, B int64 labels.
BATCH_BYTES = B * 3 * S * S + B * 8


def _in_flight_run(dl, epochs=2):
    """Streams `epochs` epochs slowly (the actors fill what the window
    allows before each take); returns the digests and, per take, the
    batches handed out and not yet taken (the loader's counters since
    the start: nothing is dropped here)."""
    t0 = time.monotonic()  # both actors started: both take work
    while dl.stats()["actors_unplaced"] and time.monotonic() - t0 < 60:
        time.sleep(0.05)
    got, ahead = [], []
    for _ in range(epochs):
        out = []
        for b in dl:
            out.append(b)
            st = dl.stats()
            ahead.append(st["batches_handed"] - st["batches"])
            time.sleep(0.03)
        got.append(digests(out))
    return got, ahead


def test_object_store_bytes_bounds_the_batches_in_flight(cluster, ds, local, tmp_path):
    """object_store_bytes: once the first chunk told a batch's bytes, the
    batches in flight ahead of the trainer (handed out, not taken: in
    the object store or being prepared) fit the budget, 5 batches here,
    not the count window's 2 actors x depth 2 x chunk 2 = 8 (the first
    hand-out, before any chunk was done, sent 8); the stream is the local
    loader's, and stats() and the telemetry say that the budget held the
    actors back."""
    path = tmp_path / "t.jsonl"
    with make(ds, 2, chunk=2, object_store_bytes=5 * BATCH_BYTES,
              telemetry_path=path) as dl:
        got, ahead = _in_flight_run(dl)
        assert got == local[0]
        assert max(ahead[2:]) <= 5, ahead
        assert max(ahead) >= 4, ahead  # the budget is used, not starved
        st = dl.stats()
        assert (st["window"], st["batch_bytes"], st["object_store_bytes"]) == \
            (5, BATCH_BYTES, 5 * BATCH_BYTES), st
        assert st["budget_held"] > 0, st
    last = json.loads(path.read_text().splitlines()[-1])["ray"]
    assert (last["window"], last["object_store_bytes"]) == (5, 5 * BATCH_BYTES), last
    assert last["budget_held_total"] == st["budget_held"], last


def test_object_store_bytes_below_a_chunk_per_actor(cluster, ds, local):
    """A budget under one chunk per actor (1 byte) never narrows the
    window below that, so it cannot deadlock: 2 actors x chunk 2 = 4
    batches in flight, the same stream. The default budget is a quarter
    of the cluster's object store."""
    with make(ds, 2, chunk=2, object_store_bytes=1) as dl:
        got, ahead = _in_flight_run(dl)
        assert got == local[0]
        assert max(ahead[3:]) <= 4, ahead
        assert dl.stats()["window"] == 4
    with make(ds, 1) as dl:
        store = ray.cluster_resources()["object_store_memory"]
        assert dl.stats()["object_store_bytes"] == int(store / 4) > 0


def test_work_dropped_at_set_epoch_elsewhere(cluster, ds, local):
    """A whole epoch hands the next one's first chunks out ahead; set_epoch
    elsewhere drops them. The actor must go on with the new iteration's
    work at once (ray.cancel of its queued tasks left the next ones unsent:
    the trainer waited for an idle actor until Ray declared it dead, and
    the actor was counted failed). The time bound only keeps a stall from
    passing as slow: an iteration (15 one-batch tasks) takes 0.2 s alone
    on a 2-core machine, and one took 6 s in a loaded CI run (where a
    bound of 5 s failed)."""
    with make(ds, 1, chunk=1, depth=1) as dl:
        for i in range(6):
            dl.set_epoch(i // 2 % 2)  # 0 0 1 1 0 0: three drops
            t0 = time.monotonic()
            assert digests(dl) == local[0][i // 2 % 2]
            assert time.monotonic() - t0 < 30, f"iteration {i} stalled"
            assert dl.stats()["actors_failed"] == 0, f"iteration {i}"


def test_task_error_reaches_the_trainer(cluster, ds, tmp_path):
    """A batch whose preparation fails in the actor (a corrupt image,
    on_error='fail') raises the engine's error, naming the file, at that
    batch's take, not a Ray wrapper and not a hang."""
    import shutil
    bad = tmp_path / "bad"
    shutil.copytree(ds, bad)
    victim = sorted(p for p in bad.rglob("*") if p.is_file())[0]
    victim.write_bytes(b"\xff\xd8\xff\xe0 not a jpeg")
    with make(bad, 1, on_error="fail") as dl:
        with pytest.raises(sluice.Error, match=victim.name):
            for _ in dl:
                pass


def test_actors_not_placed(cluster, ds, local, monkeypatch):
    """More actors than the cluster can place (3 x 1 CPU on 2 CPUs): the
    placed ones prepare the whole stream, the loader warns once naming
    the resources (it handed work to the unplaced actor and waited for it
    for ever, silently)."""
    monkeypatch.setattr(sluice.ray, "_PLACE_WARN_S", 0.0, raising=False)
    got = []
    with pytest.warns(RuntimeWarning, match=r"[12] of 3 actors could not be placed.*CPU 1"):
        dl = sluice.ray.DataLoader(ds, B, S, seed=SEED, num_actors=3, chunk=2,
                                   depth=1, actor_options={"num_cpus": 1})
        try:
            t = threading.Thread(target=lambda: got.append(digests(dl)), daemon=True)
            t.start()
            t.join(30)
            assert not t.is_alive(), "the epoch hung"
            assert got == [local[0][0]]
            assert dl.stats()["actors_unplaced"] >= 1
        finally:
            dl.close()


def test_skipped_names_the_damaged_files(cluster, ds, tmp_path):
    """skipped() lists the samples the actors skipped (on_error='skip'),
    each once, as sluice.torch.DataLoader's (and those of batches prepared
    ahead; the trainer had no way to know)."""
    dmg = damaged_copy(ds, tmp_path / "dmg")
    loc = sluice.torch.DataLoader(source=dmg, batch_size=B, image_size=S, seed=SEED,
                                  num_workers=1, on_error="skip")
    for _ in loc:
        pass
    with make(dmg, 3, chunk=2, on_error="skip") as dl:
        for _ in dl:
            pass
        # The actors prepare up to an epoch ahead: epoch 1's skips too.
        got = dl.skipped()
        assert len(loc.skipped()) == 2 and len(got) == len(set(got))
        assert sorted(m for m in got if m.startswith("epoch 0: ")) == sorted(loc.skipped())
        # Retired actors' messages stay (they went with the actor): two
        # of three retire, epoch 1 runs (they are reaped), epoch 0's
        # messages are all still there.
        dl.set_actors(1)
        for _ in dl:
            pass
        assert len(dl.stats()["per_actor"]) == 1  # the two were killed
        after = dl.skipped()
        assert set(got) <= set(after) and len(after) == len(set(after))


def test_bad_option_raises_its_error(cluster, ds, tmp_path):
    """An option the engine refuses (or a source it cannot open) fails in
    the actors' constructor; the trainer raises that error, as the local
    loader would, not Ray's ActorDiedError."""
    with pytest.raises(ValueError, match="on_error must be"):
        make(ds, 1, on_error="raise")
    with pytest.raises((sluice.Error, FileNotFoundError, ValueError),
                       match="could not start"):
        make(tmp_path / "missing", 1)


def test_rank_sharding_and_tensors(cluster, ds, local):
    with make(ds, 2, rank=1, world_size=2, dtype=torch.float32) as dl:
        x, y = next(iter(dl))
        assert x.dtype == torch.float32 and y.dtype == torch.int64
        assert tuple(x.shape[1:]) == (3, S, S)
    with make(ds, 2, rank=1, world_size=2) as dl:
        assert digests(dl) == local[1]
        with pytest.raises(ValueError, match="world_size"):
            make(ds, 1).load_state_dict(dl.state_dict())


def test_actors_added_and_removed_mid_epoch(cluster, ds, local):
    with make(ds, 1, chunk=1) as dl:
        out = []
        for i, b in enumerate(dl):
            out.append(b)
            if i == 2:
                dl.set_actors(3)
                assert dl.num_actors == 3
            if i == 8:
                dl.set_actors(1)
                assert dl.num_actors == 1
        assert digests(out) == local[0][0]
        st = dl.stats()
        acts = [d["action"] for d in st["decisions"]]
        assert acts == ["add", "add", "remove"]
        assert st["actors_started"] == 3
        assert len(st["per_actor"]) == 1  # the retired ones were killed
        assert digests(dl) == local[0][1]


def _kill_test(ds, local, kill):
    # chunk 2: 2 actors x depth 2 x 2 batches ahead, less than the epoch,
    # so the victim dies with batches not yet prepared
    with make(ds, 2, chunk=2) as dl:
        out = []
        victim = None
        for i, b in enumerate(dl):
            out.append(b)
            if i == 1:
                victim = dl.actors()[0]
                kill(victim)
        assert digests(out) == local[0][0]  # nothing lost, nothing twice
        st = dl.stats()
        assert st["actors_failed"] == 1 and st["rehanded_batches"] >= 1
        lost = [d for d in st["decisions"] if d["action"] == "lost"]
        assert len(lost) == 1 and "re-handed" in lost[0]["reason"]
        assert st["actors"] == 2  # replaced
        assert digests(dl) == local[0][1]


def test_actor_killed_by_ray_kill(cluster, ds, local):
    _kill_test(ds, local, lambda a: ray.kill(a))


def test_actor_process_killed(cluster, ds, local):
    def kill(a):
        os.kill(ray.get(a.pid.remote()), signal.SIGKILL)
    _kill_test(ds, local, kill)


def _train_until_removed(dl, local):
    """Epochs (16 at most) until autoscale removed an actor: the trainer
    slow (0.2 s a batch) while 2 actors run, so that they get ahead; each
    epoch's stream the local loader's."""
    for i in range(16):
        dl.set_epoch(i % 2)
        got = []
        for b in dl:
            got.append(b)
            if dl.stats()["target_actors"] == 2:
                time.sleep(0.2)  # now the trainer is the slow one
        assert digests(got) == local[0][i % 2]
        if "remove" in [d["action"] for d in dl.stats()["decisions"]]:
            break


def test_autoscale_adds_then_removes(cluster, ds, local):
    """A trainer that waits gets an actor more; one whose actors stay a
    whole actor's share ahead loses one. The stream stays the same."""
    with make(ds, 1, chunk=1, depth=1, autoscale={"period": 0.3},
              max_actors=2, min_actors=1) as dl:
        # until it removed one: a few epochs on a quiet machine; more where
        # the machine is loaded and the actors get ahead slowly
        _train_until_removed(dl, local)
        st = dl.stats()
        acts = [d["action"] for d in st["decisions"]]
        assert acts[:2] == ["add", "add"], st["decisions"]
        assert "waited" in st["decisions"][1]["reason"]
        assert "remove" in acts, st["decisions"]
        rm = next(d for d in st["decisions"] if d["action"] == "remove")
        assert "ready ahead" in rm["reason"]


def test_autoscale_removes_under_a_byte_budget(cluster, ds, local):
    """Under object_store_bytes the window (2 actors x chunk 2 = 4 here,
    the floor) never has an actor's depth x chunk = 4 ready beyond the
    batch asked for: one actor's share is the window's over the actors
    (2), else a budget kept every actor autoscale added."""
    with make(ds, 1, chunk=2, autoscale={"period": 0.3}, max_actors=2,
              min_actors=1, object_store_bytes=1) as dl:
        _train_until_removed(dl, local)
        acts = [d["action"] for d in dl.stats()["decisions"]]
        assert acts[:2] == ["add", "add"] and "remove" in acts, dl.stats()["decisions"]


def test_skipped_batches_as_local(cluster, ds, tmp_path):
    """on_error='skip': a batch whose samples are all bad is left out, as
    the local loader leaves it out; a partly bad one is short the same."""
    import shutil
    good = sorted(os.path.join(r, f) for r, _, fs in os.walk(ds) for f in fs)
    for cls, n in (("a", 2), ("b", 6)):
        os.makedirs(tmp_path / cls)
        for i in range(n):
            shutil.copy(good[i if cls == "a" else 10 + i], tmp_path / cls / f"{i}.jpg")
    for i in (0, 1):  # batch 0 (unshuffled): both samples bad
        with open(tmp_path / "a" / f"{i}.jpg", "r+b") as f:
            f.truncate(200)
    with open(tmp_path / "b" / "5.jpg", "r+b") as f:  # and one of batch 3
        f.truncate(200)
    kw = dict(batch_size=2, image_size=S, seed=SEED, shuffle=False, on_error="skip")
    loc = digests(sluice.torch.DataLoader(source=str(tmp_path), num_workers=1, **kw))
    with sluice.ray.DataLoader(str(tmp_path), num_actors=2, actor_options=SMALL,
                               chunk=2, **kw) as dl:
        got = list(dl)
        assert [len(y) for _, y in got] == [2, 2, 1]
        assert digests(got) == loc
