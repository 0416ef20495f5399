"""sluice.ray.DataLoader: batches prepared by Ray actors, each running
sluice's C engine, delivered to the trainer in order through Ray's object
store (numpy arrays: zero-copy on the same node, one transfer across
nodes)::

    import ray, sluice.ray
    ray.init()
    loader = sluice.ray.DataLoader(source="data/train", batch_size=64,
                                   image_size=224, seed=0, num_actors=4)
    for epoch in range(start, epochs):
        loader.set_epoch(epoch)
        for images, labels in loader:      # torch tensors
            ...

The interface is sluice.torch.DataLoader's (native mode): one iteration is
one epoch; set_epoch; state_dict() is the exact position, load_state_dict()
resumes bit for bit; rank / world_size shard the data as the local loader
does (defaults: torch.distributed's when it is initialised).

Every batch is a pure function of (seed, epoch, batch index), so any actor
can prepare any batch: the trainer hands out work in chunks of `chunk`
batches (sluice.Loader.start_plan in the actor), at most `depth` chunks
queued per actor, and yields batch g when its object is ready. The stream
is the local loader's, digest for digest, whatever the actors and their
speed. Elastic: set_actors(n) adds actors (they take the next chunks) or
retires some (no new work; killed once their batches are consumed). An
actor that dies (ray.kill, its process killed, its node lost) has its
batches not yet consumed prepared by the others, and a replacement is
started while the target count says so: nothing lost, nothing duplicated.
autoscale=True lets a policy in the trainer process change the count
between min_actors and max_actors (see _Autoscale); every change, with its
reason, is in stats()["decisions"] and logged on the "sluice.ray" logger.

The sluice package must be importable in the actors' processes (installed
on every node, or on PYTHONPATH when Ray starts).
"""
import concurrent.futures
import logging
import operator
import os
import time
import warnings

__all__ = ["DataLoader"]

log = logging.getLogger("sluice.ray")

# Seconds an actor may wait for Ray to place it, counted from when the
# first actor started (or none started: from its creation, _START_WARN_S),
# before the loader warns (once) that it could not be placed yet.
_PLACE_WARN_S = 10.0
_START_WARN_S = 30.0

# Options whose change makes a saved position mean other batches
# (sluice.torch's).
_STATE_CHECKED = ("batch_size", "world_size", "drop_last", "seed",
                  "shuffle", "batches_per_epoch")

# object_store_bytes's default: this share of the cluster's object store
# (ray.cluster_resources()["object_store_memory"]), split among the
# world_size ranks (each runs a loader, or a share group, of its own).
# Ray Data's executor takes half by default for one dataset; a quarter
# leaves the rest to the training's own objects and to a second loader
# (an evaluation set) without spilling to disk.
STORE_SHARE = 0.25


def _store_budget(ray, given, world_size):
    """The byte budget for batches in flight: object_store_bytes as given
    (0: none, the batch window only), or by default STORE_SHARE of the
    cluster's object store over the ranks (0 where Ray reports none)."""
    if given is not None:
        if given < 0:
            raise ValueError("object_store_bytes must be >= 0 (0: no byte budget)")
        return int(given)
    if not ray.is_initialized():  # as the loader's first actor would
        ray.init()
    total = ray.cluster_resources().get("object_store_memory", 0)
    return int(total * STORE_SHARE / max(1, world_size))


def _window(count, budget, batch_bytes, live, chunk):
    """Batches that may be in flight ahead of the trainer (a share
    group's slowest job): the count window, narrowed by the byte budget
    once a batch's bytes are known, and never below one chunk per live
    preparer (each can always be handed one: no deadlock, whatever the
    budget). The one rule, for the lone loader and the share group. It is
    the reference: the simulator of this path keeps a C copy
    (src/sim/remote.c, sl__sim_remote_window), checked against this one
    on a grid by tests/python/test_sim_budget.py."""
    if not budget or not batch_bytes:
        return count
    return min(count, max(budget // batch_bytes, live * chunk))


def _batch_nbytes(values):
    """The largest batch's bytes in a chunk's values (images and labels;
    0 when none: every batch skipped)."""
    return max((x.nbytes + y.nbytes for x, y in (v for v in values or () if v is not None)),
               default=0)


def _import_ray():
    try:
        import ray
    except ImportError as e:
        raise ImportError("sluice.ray needs Ray (pip install ray)") from e
    return ray


class _Preparer:
    """A Ray actor: one sluice.Loader, prepares planned batches. storage:
    emulated slow storage (latency_us, bytes_per_s) for tests and
    benchmarks (sluice/testing.h)."""

    def __init__(self, source, batch_size, image_size, options, storage=None):
        import sluice
        self._loader = sluice.Loader(source, batch_size, image_size, epochs=1,
                                     **options)
        if storage:
            self._loader._testing_storage(*storage)
        self._reads = {}  # epoch -> storage reads (samples)
        self._renewed = 0  # plans that found batches still held

    def info(self):
        L = self._loader
        return {"batches_per_epoch": L.batches_per_epoch,
                "num_samples": L.num_samples, "pid": os.getpid()}

    def pid(self):
        return os.getpid()

    def engines_renewed(self):
        """Plans started while an earlier task's batches were still held,
        so the Loader made a new engine (threads, buffers, cache): 0 when
        Ray let go of each task's return values once stored."""
        return self._renewed

    def prepare(self, batches):
        """The planned (epoch, batch) pairs' (images, labels), a list: one
        return value, one object in the store per chunk (Ray's work per
        object, in the trainer and the raylet, was most of what a remote
        batch cost beside its preparation); None for a batch whose samples
        were all skipped (on_error='skip'), which the local loader leaves
        out too. Storage reads are counted against the first batch's
        epoch."""
        cached = self._loader.get("cache_bytes") > 0
        st = self._loader.stats()
        before = st["cache"]["misses"]
        self._renewed += st["batches_held"] > 0
        out = self._prepare(batches, views=True)
        if cached:  # a plan may start a new engine (batches held): from 0
            after = self._loader.stats()["cache"]["misses"]
            n = after - before if after >= before else after
        else:  # every sample prepared was read
            n = sum(len(v[1]) for v in out if v is not None)
        e = batches[0][0]
        self._reads[e] = self._reads.get(e, 0) + n
        return out

    def _prepare(self, batches, views=False):
        """views=True returns the engine's own buffers, for a task's return
        values: Ray copies them into its object store as the task ends and
        lets go (engines_renewed counts the times it did not), so the next
        plan keeps this engine; one copy of each batch instead of two.
        Otherwise copies: a Loader starts a new engine, with an empty
        cache, when a plan starts under batches still held (the calls
        below, and sluice.ray_cache's per-epoch calls, start several)."""
        import sluice
        L = self._loader
        L.start_plan(batches)
        out = [(x, y) if views else (x.copy(), y.copy()) for x, y in L]
        if len(out) != len(batches):  # some batch was empty: find which
            out = []  # nothing held: the plans below keep the engine
            for b in batches:
                try:
                    L.start_plan([b])
                    got = [(x.copy(), y.copy()) for x, y in L]
                except sluice.Error as e:  # a plan that delivered nothing
                    if "every sample was skipped" not in str(e):
                        raise
                    got = []
                out.append(got[0] if got else None)
        return out

    def skipped(self):
        """The messages of the samples its Loader skipped (on_error=
        'skip', "epoch E: FILE: cause") and the source's warnings."""
        return self._loader.skipped()

    def cache_stats(self):
        """Storage reads per epoch and the cache's size now (the
        counters sluice.ray_cache's preparers keep, as far as they apply)."""
        c = self._loader.stats().get("cache") or {}
        return {"part": None, "entries": c.get("entries", 0),
                "bytes": c.get("bytes", 0),
                "by_epoch": {e: {"storage_reads": n}
                             for e, n in self._reads.items()}}


class _Chunk:
    """One task: batches gs, its one return value (ref), and a future that
    Ray completes with the value (fetched, zero-copy on this node) or the
    error, from its own thread: the trainer sees a chunk done without a
    call into Ray (ray.wait is a request to the raylet; polled at every
    take it was most of what the trainer and the raylet spent per batch)."""

    __slots__ = ("ref", "gs", "fut")

    def __init__(self, ref, gs):
        self.ref, self.gs, self.fut = ref, gs, ref.future()

    def value(self, timeout=None):
        """The chunk's batches; raises the task's error."""
        return self.fut.result(timeout)


class _Actor:
    """The trainer's view of one actor: handle, queued chunks, counters."""

    def __init__(self, handle, ident):
        self.handle, self.id = handle, ident
        # Done once the actor runs (or its creation failed): work goes to
        # started actors only; a task queued on an actor Ray cannot place
        # (its resources taken) waited for ever, and the trainer with it.
        self.info = handle.info.remote()
        self.ready = self.info.future()
        self.ready_t = None  # when it started
        self.ready.add_done_callback(lambda _: setattr(self, "ready_t", time.monotonic()))
        self.part = None    # the cache part it owns (partition=True)
        self.chunks = []    # _Chunk handed, not yet complete
        self.retiring = False
        self.batches = 0    # batches it completed
        self.started = time.monotonic()


class _Autoscale:
    """The trainer-side policy (autoscale=True, or a dict of these
    arguments). Every `period` seconds it looks at the last period:

    - add one actor when the trainer waited for batches more than
      `add_wait` of the time, below max_actors and while the cluster has
      the CPUs for one more (else it says so once: "hold");
    - remove one when the trainer waited less than `remove_wait` and the
      batches ready beyond the one it asked for, at each request, never
      fell below one actor's share of the window (depth x chunk; less
      where object_store_bytes narrows the window, which then never has
      depth x chunk per actor ready) in the period: the actors are ahead
      by at least a whole actor, which therefore does not pay; never
      below min_actors.

    Each change goes through set_actors with its reason (stats()
    ["decisions"], the "sluice.ray" logger)."""

    def __init__(self, min_actors, max_actors, period=2.0, add_wait=0.15,
                 remove_wait=0.02):
        if not 1 <= min_actors <= max_actors:
            raise ValueError("autoscale needs 1 <= min_actors <= max_actors")
        self.min, self.max, self.period = min_actors, max_actors, period
        self.add_wait, self.remove_wait = add_wait, remove_wait
        self.t0 = self.min_ahead = None
        self.held = False

    def ahead(self, n):
        """Batches ready beyond the one the trainer asks for."""
        self.min_ahead = n if self.min_ahead is None else min(self.min_ahead, n)

    def tick(self, dl, now):
        """Returns (new target, reason) or None."""
        if self.t0 is None or now - self.t0 >= self.period:
            last = None if self.t0 is None else (
                now - self.t0, dl._wait_s - self.wait0, dl._taken - self.taken0,
                self.min_ahead)
            self.t0, self.wait0, self.taken0, self.min_ahead = now, dl._wait_s, dl._taken, None
            return self._judge(dl, *last) if last else None
        return None

    def _judge(self, dl, dt, waited, taken, min_ahead):
        n, wait = dl._target, waited / dt
        if wait > self.add_wait and n < self.max:
            cpus = dl._actor_options.get("num_cpus", 1)
            if dl._ray.available_resources().get("CPU", 0) + 1e-9 < cpus:
                if not self.held:
                    self.held = True
                    dl._decide("hold", f"trainer waited {wait:.0%} of the last "
                               f"{dt:.1f} s but the cluster has no {cpus} CPU "
                               "free for another actor", n, n)
                return None
            self.held = False
            return n + 1, (f"trainer waited {wait:.0%} of the last {dt:.1f} s "
                           f"({taken / dt:.1f} batches/s taken): one more actor")
        share = min(dl.depth * dl.chunk, dl._window // max(1, len(dl._placed())))
        if (wait < self.remove_wait and n > self.min and taken > 0 and
                min_ahead is not None and min_ahead >= share):
            return n - 1, (f"trainer waited {wait:.0%} of the last {dt:.1f} s "
                           f"and >= {min_ahead} batches were always ready ahead "
                           f"(one actor's share is {share}): one actor fewer")
        return None


class DataLoader:
    """DataLoader(source, batch_size=64, image_size=224, *, shuffle=True,
    seed=None, drop_last=False, rank=None, world_size=None, dtype=None,
    num_actors=2, actor_threads=1, chunk=8, depth=2, actor_options=None,
    autoscale=False, min_actors=1, max_actors=None, tensors=True,
    device=None, partition=False, object_store_bytes=None, **options)

    num_actors Ray actors, each a sluice.Loader with actor_threads decode
    threads and the options given (mode=, layout=, on_error=, mean=, ...);
    actor_options go to the actor class's .options() (num_cpus defaults to
    actor_threads; resources=, scheduling_strategy=, ...). chunk: batches
    per task, returned as one object (Ray's work per task and per object,
    in the actor, the trainer, the raylet and a share group, is shared by
    chunk batches): 8, the best of 2, 4 and 8 measured on 2 cores for
    remote actors and for a share group (bench/RESULTS.md). depth: tasks
    queued per actor. Up to num_actors x depth x chunk
    batches are in the object store ahead of the trainer (the first after
    one chunk's preparation), and at most object_store_bytes of them: a
    byte budget for the batches handed out and not yet taken (default: a
    quarter of the cluster's object store, ray.cluster_resources()
    ["object_store_memory"], over world_size; 0: none). A batch's bytes
    are known from the first chunk prepared (before that the count
    alone holds); the budget never narrows the window below one chunk
    per actor, so a budget under that still streams (the store then
    holds that much). The chunk the trainer takes from stays in the
    store until its last batch is taken: at most one chunk more.
    stats() says the window now, the budget and how often the budget
    held the actors back (budget_held); the stream is the same
    whatever the budget, only its pace changes. tensors=False yields the numpy
    arrays (the images: read-only views of the object store) instead of
    torch tensors; device= moves the tensors there (non_blocking). The
    image tensors on the CPU are views of the object store (no copy;
    with share=, copies: see below); the labels are always copies, so
    keeping them does not keep a batch in the store.
    ray.init() is the caller's (the loader uses the cluster it finds, or
    starts a local one as ray does by default).

    share="name" (or True: a name from the data and options) attaches this
    job to a preparer group shared by every job with the same data, seed,
    transforms and batch size, on the same cluster: each batch is prepared
    once and every attached job receives it (sluice.ray_group.SharedLoader;
    more options there). Its image tensors are copies owned by the job
    (about 1.3 ms a 64 x 224 x 224 x 3 uint8 batch), so an in-place op
    never alters what the other jobs receive.

    partition=True (with cache_bytes=N, each actor's cache) partitions the
    sample cache across the actors: each caches its part of the dataset
    and serves it to the others, which ask it before reading storage; the
    cluster holds num_actors x N (sluice.ray_cache; cache_stats()).
    partition="local" is the comparison: each actor caches what it reads
    (N each), nothing shared.

    telemetry_path="run.jsonl" writes a line every telemetry_ms (100) in
    the engine's snapshot schema from the trainer's side: samples/s, the
    share of time it waited, the actors' decode threads and each add /
    remove with its reason, the partitioned cache's hits (remote ones
    counted); `sluice plot run.jsonl` draws it (sluice.ray_telemetry)."""

    def __new__(cls, *args, share=None, **kw):
        if share is not None and share is not False and cls is DataLoader:
            from .ray_group import SharedLoader
            cls = SharedLoader
        return super().__new__(cls)

    def __init__(self, source, batch_size=64, image_size=224, *, shuffle=True,
                 seed=None, drop_last=False, rank=None, world_size=None,
                 dtype=None, num_actors=2, actor_threads=1, chunk=8, depth=2,
                 actor_options=None, autoscale=False, min_actors=1,
                 max_actors=None, tensors=True, device=None, share=None,
                 partition=False, storage=None, telemetry_path=None,
                 telemetry_ms=100, object_store_bytes=None, **options):
        self._ray = ray = _import_ray()
        self._torch = None
        if tensors:
            import torch
            self._torch = torch
        self.device = None if device is None else self._torch.device(device)
        if rank is None or world_size is None:
            r, w = _dist_defaults(self._torch, rank, world_size)
            rank, world_size = r, w
        if num_actors < 1 or chunk < 1 or depth < 1 or actor_threads < 1:
            raise ValueError("num_actors, chunk, depth and actor_threads must be >= 1")
        self.source, self.batch_size, self.image_size = source, batch_size, image_size
        self.shuffle, self.drop_last = bool(shuffle), bool(drop_last)
        self.seed = 0 if seed is None else int(seed)
        self.rank, self.world_size = rank, world_size
        self.chunk, self.depth = chunk, depth
        self.object_store_bytes = _store_budget(ray, object_store_bytes, world_size)
        dtype_name = "uint8"
        if dtype is not None:
            dtype_name = dtype if isinstance(dtype, str) else str(dtype).rsplit(".", 1)[-1]
        self._options = dict(options, shuffle=self.shuffle, seed=self.seed,
                             drop_last=self.drop_last, rank=rank,
                             world_size=world_size, threads=actor_threads,
                             dtype=dtype_name)
        self._actor_options = {"num_cpus": actor_threads, "max_restarts": 0,
                               "max_task_retries": 0}
        self._actor_options.update(actor_options or {})
        self._storage = tuple(storage) if storage else None
        self._parts = num_actors if partition else 0
        self._partition = partition
        if partition and (not options.get("cache_bytes") or options.get("cache_decoded")):
            raise ValueError("partition=True needs cache_bytes > 0 (each actor's "
                             "part of the cache) and the encoded tier (no "
                             "cache_decoded)")
        if partition:
            from .ray_cache import part_preparer_class
            self._cls = part_preparer_class(ray)
        else:
            self._cls = ray.remote(_Preparer)
        self._actors = []      # _Actor, live or retiring
        self._next_id = 0
        self._target = num_actors
        self._policy = None
        if autoscale:
            kw = autoscale if isinstance(autoscale, dict) else {}
            self._policy = _Autoscale(min_actors, max_actors or max(num_actors, 4), **kw)
        self._decisions = []
        self._unplaced_warned = False
        self._retired_skipped = []  # retired actors' skipped() messages
        self._failed = 0
        self._rehanded = 0
        self._wait_s = 0.0
        self._taken = 0        # batches yielded
        self._samples = 0
        self._completed = 0    # batches the actors completed
        self._tasks = self._handed = 0  # tasks sent, batches in them
        # The byte budget's measures: the largest batch's bytes seen (0
        # until a chunk completed), the window it gave at the last
        # hand-out, the hand-outs it held back (a chunk the count window
        # allowed was not sent).
        self._batch_bytes = 0
        self._window = num_actors * depth * chunk
        self._budget_held = 0
        self._run = 0
        self._runs = 0
        self._ended = {}  # a superseded iteration's number: what did it
        self._start = (0, 0)
        self._resume = None  # load_state_dict's position, not yet begun
        self._saved = (0, 0)
        self._pos = (0, 0)
        # This iteration's work: g -> its chunk (object, [g...]),
        # g -> the actor preparing it, batches to hand again, and g -> the
        # value of a fetched chunk's batch not yet taken.
        self._ref, self._owner, self._redo, self._got = {}, {}, [], {}
        self._next_g = self._hand_g = self._end_g = self._horizon = 0
        self._carry_from = None  # work handed for an iteration from there
        self._telemetry = None
        self._start_work(num_actors)
        if telemetry_path is not None:
            from .ray_telemetry import RayTelemetry
            self._telemetry = RayTelemetry(self, os.fspath(telemetry_path), telemetry_ms)

    def _start_work(self, num_actors):
        """Starts the actors; learns the epoch's size (from the first that
        starts)."""
        ray = self._ray
        self._spawn(num_actors, "start")
        refs = [a.info for a in self._actors]
        done = ray.wait(refs, num_returns=1, timeout=_START_WARN_S)[0]
        if not done:
            self._warn_unplaced(force=True)
            done = ray.wait(refs, num_returns=1)[0]
        try:
            info = ray.get(done[0])
        except self._ray.exceptions.RayActorError as e:
            if not e.actor_init_failed:
                raise
            self.close()
            raise _init_error(e) from e
        self.batches_per_epoch = info["batches_per_epoch"]
        self.num_samples = info["num_samples"]

    # ------------------------------------------------------------ actors

    def _live(self):
        return [a for a in self._actors if not a.retiring]

    def _placed(self):
        """The live actors that started (the others wait for resources)."""
        return [a for a in self._live() if a.ready.done()]

    def _warn_unplaced(self, force=False):
        """Warns once when actors waited _PLACE_WARN_S longer than the
        first to start (force: none started in _START_WARN_S), naming what
        each asks and what the cluster has."""
        live = self._live()
        waiting = [a for a in live if not a.ready.done()]
        if self._unplaced_warned or not waiting:
            return
        if not force:
            first = min((a.ready_t for a in live if a.ready_t is not None), default=None)
            if first is None or time.monotonic() - max(
                    first, min(a.started for a in waiting)) < _PLACE_WARN_S:
                return
        self._unplaced_warned = True
        msg = _unplaced_message(self._ray, self._actor_options, len(waiting), len(live),
                                "The started actors do the work meanwhile")
        log.warning("%s", msg)
        warnings.warn(msg, RuntimeWarning, stacklevel=4)

    def _decide(self, action, reason, before, after):
        d = {"t": time.time(), "action": action, "actors_before": before,
             "actors_after": after, "reason": reason}
        self._decisions.append(d)
        log.info("%s: %d -> %d actors: %s", action, before, after, reason)

    def _spawn(self, n, reason):
        before = len(self._live())
        for _ in range(n):
            args = (self.source, self.batch_size, self.image_size,
                    self._options, self._storage)
            part = None
            if self._parts:  # a part no actor holds (a dead one's)
                held = {a.part for a in self._actors}
                part = next((p for p in range(self._parts) if p not in held), None)
                args = args[:4] + (part, self._parts, self._storage,
                                   self._partition == "local")
            h = self._cls.options(**self._actor_options).remote(*args)
            self._actors.append(_Actor(h, self._next_id))
            self._actors[-1].part = part
            self._next_id += 1
            if part is not None and reason != "start":
                reason += f" (it takes cache part {part}, empty)"
        if n:
            self._decide("add", reason, before, before + n)

    def set_actors(self, n, reason="set_actors"):
        """Targets n actors from now on, an epoch running or not: new ones
        take the next chunks; surplus ones get no new work and are killed
        once the batches they prepared are consumed."""
        if n < 1:
            raise ValueError("set_actors needs n >= 1")
        self._target = n
        live = self._live()
        if n > len(live):
            self._spawn(n - len(live), reason)
            return
        if n < len(live):
            # The ones with the least queued work go first.
            gone = sorted(live, key=lambda a: len(a.chunks))[:len(live) - n]
            for a in gone:
                a.retiring = True
            self._decide("remove", reason, len(live), n)
            self._reap()

    @property
    def num_actors(self):
        """Actors that take work now (retiring ones not counted)."""
        return len(self._live())

    def actors(self):
        """The handles of the actors that take work now."""
        return [a.handle for a in self._live()]

    def _reap(self):
        """Kills retiring actors none of whose batches wait for the
        trainer."""
        for a in list(self._actors):
            if a.retiring and not any(self._owner.get(g) is a for g in self._pending()):
                if all(c.fut.done() for c in a.chunks):
                    self._actors.remove(a)
                    if a.ready.done():  # its messages stay (skipped())
                        self._retired_skipped = _merge_skipped(
                            self._ray, [a.handle.skipped.remote()],
                            self._retired_skipped, timeout=10)
                    try:
                        self._ray.kill(a.handle)
                    except Exception:  # already gone
                        pass

    def _failed_actor(self, a, err):
        """a died: its batches not yet consumed go to the others; a
        replacement when the target says so."""
        if a not in self._actors:
            return
        self._actors.remove(a)
        self._failed += 1
        lost = sorted(g for g in self._pending()
                      if self._owner.get(g) is a and g not in self._got)
        for g in lost:
            del self._ref[g]
            del self._owner[g]
        self._redo = sorted(set(self._redo) | set(lost))
        self._rehanded += len(lost)
        live = len(self._live())
        self._decide("lost", f"actor {a.id} died ({type(err).__name__}); "
                     f"{len(lost)} batches re-handed", live + (not a.retiring), live)
        if self._failed > 4 * max(self._target, 1) + 4:
            raise RuntimeError(f"sluice.ray: {self._failed} actors died; "
                               f"the last: {err}") from err
        if live < self._target:
            self._spawn(self._target - live, f"replace actor {a.id}")

    # ------------------------------------------------------------ work

    def _pending(self):
        return list(self._ref)

    def _collect(self):
        """Completed chunks leave the actors' queues, their batches fetched
        (zero-copy on this node; pulled here from another); a chunk that
        failed because its actor died re-hands that actor's batches."""
        ray = self._ray
        for a in list(self._actors):
            for c in [c for c in a.chunks if c.fut.done()]:
                try:
                    values = c.value()
                except _lost(ray) as e:
                    self._failed_actor(a, e)
                    break
                except Exception:  # the task's own error: at its get
                    values = None
                self._completed_chunk(a, c, values)

    def _completed_chunk(self, a, chunk, values):
        """chunk left a's queue (once; a no-op after); its batches
        (values: None when the task failed, raised again at the batch's
        get) wait in the trainer for their take, those still wanted (not
        taken, not re-handed)."""
        if not any(c is chunk for c in a.chunks):
            return
        a.chunks = [c for c in a.chunks if c is not chunk]
        a.batches += len(chunk.gs)
        self._completed += len(chunk.gs)
        self._batch_bytes = max(self._batch_bytes, _batch_nbytes(values))
        for g, v in zip(chunk.gs, values or ()):
            if self._ref.get(g) is chunk:
                self._got[g] = v

    def _send(self, a, gs):
        nb = self.batches_per_epoch
        args = [[(g // nb, g % nb) for g in gs]]
        if self._parts:  # who serves each part now
            owners = [None] * self._parts
            for b in self._actors:
                if b.part is not None:
                    owners[b.part] = b.handle
            args.append(owners)
        chunk = _Chunk(a.handle.prepare.remote(*args), gs)
        self._tasks += 1
        self._handed += len(gs)
        for g in gs:
            self._ref[g] = chunk
            self._owner[g] = a
        a.chunks.append(chunk)

    def _hand_out(self):
        """Queues chunks on live actors, up to depth each, within the
        window of batches ahead of the trainer; re-handed batches first,
        to the least busy, beyond depth (the trainer may wait on them)."""
        self._collect()
        if not self._live():
            self._spawn(self._target, "no live actor")
        self._warn_unplaced()
        live = self._placed()
        if not live:  # none started yet: _get waits for one
            return
        while self._redo:
            gs, self._redo = self._redo[:self.chunk], self._redo[self.chunk:]
            self._send(min(live, key=lambda a: len(a.chunks)), gs)
        count = len(live) * self.depth * self.chunk
        self._window = window = _window(count, self.object_store_bytes,
                                        self._batch_bytes, len(live), self.chunk)
        for a in sorted(live, key=lambda a: len(a.chunks)):
            while len(a.chunks) < self.depth:
                hi = self._chunk_end(window)
                if hi is None:
                    if window < count and self._chunk_end(count) is not None:
                        self._held_by_budget(count)
                    return
                self._send(a, list(range(self._hand_g, hi)))
                self._hand_g = hi

    def _chunk_end(self, window):
        """The end of the next chunk to hand out within `window` batches
        of the trainer, or None. Whole chunks only (but at the horizon): a
        free slot filled with what the window allowed at that take made
        chunks of 1-3 batches, each paying a whole task."""
        hi = min(self._horizon, self._next_g + window, self._hand_g + self.chunk)
        if hi <= self._hand_g or (hi - self._hand_g < self.chunk and hi < self._horizon):
            return None
        return hi

    def _held_by_budget(self, count):
        """The byte budget, not the count window, kept an actor's free
        slot empty: counted (stats()["budget_held"], the telemetry's
        budget_held_total) and said once on the "sluice.ray" logger."""
        self._budget_held += 1
        if self._budget_held == 1:
            log.info("object_store_bytes %d holds the actors back: %d batches of "
                     "%d bytes in flight at most, not %d", self.object_store_bytes,
                     self._window, self._batch_bytes, count)

    def _get(self, g):
        """Batch g's value, waiting for it; re-hands it when its actor
        died. The policy ticks at each take and while waiting."""
        ray = self._ray
        if self._policy and self._ref:  # ready beyond g, as the trainer asks
            ready = sum(1 for x, c in self._ref.items()
                        if x in self._got or c.fut.done())
            self._policy.ahead(max(0, ready - 1))
            self._autoscale(time.monotonic())  # per take, waiting or not
        first = True
        while True:
            if g in self._got:
                return self._got[g]
            chunk = self._ref.get(g)
            if chunk is None or not first:  # else handed after the last take
                self._hand_out()
                if g in self._got:
                    return self._got[g]
                chunk = self._ref.get(g)
            first = False
            # Not handed yet: the actors' queues are full of an earlier
            # iteration's work; wait for any of it.
            waits = [chunk.fut] if chunk is not None else \
                [c.fut for a in self._actors for c in a.chunks] + \
                [a.ready for a in self._live() if not a.ready.done()]
            t0 = time.monotonic()
            ready = concurrent.futures.wait(
                waits, timeout=0.25,
                return_when=concurrent.futures.FIRST_COMPLETED)[0] if waits else ()
            self._wait_s += time.monotonic() - t0
            if self._policy:
                self._autoscale(time.monotonic())
            if not ready or chunk is None:
                continue
            try:
                self._completed_chunk(self._owner[g], chunk, chunk.value())
                return self._got[g]
            except _lost(ray) as e:
                self._failed_actor(self._owner[g], e)
            except ray.exceptions.RayTaskError as e:
                raise e.as_instanceof_cause() from None

    def _autoscale(self, now):
        d = self._policy.tick(self, now)
        if d:
            n, reason = d
            self.set_actors(n, reason)

    # ------------------------------------------------------------ iteration

    def __len__(self):
        return self.batches_per_epoch

    def __iter__(self):
        epoch, batch = self._start
        self._start = (epoch + 1, 0)
        self._resume = None
        self._runs += 1
        self._supersede("a newer iter(loader)")
        self._run = run = self._runs
        nb = self.batches_per_epoch
        g0 = epoch * nb + batch
        if self._carry_from != g0:  # the next epoch's work is not this
            self._drop_work()
            self._hand_g = g0
        self._carry_from = None
        self._next_g = g0
        self._end_g = (epoch + 1) * nb
        # Work is handed out up to one epoch ahead, as the local loader
        # prefetches the next epoch: kept if the next iteration starts
        # there (not after set_epoch / load_state_dict elsewhere).
        self._horizon = self._end_g + nb
        self._pos = (epoch, batch)
        self._hand_out()  # the actors start now, not at the first next()
        return self._batches(run)

    def _batches(self, run):
        nb = self.batches_per_epoch
        try:
            while self._next_g < self._end_g:
                self._check_run(run)
                g = self._next_g
                v = self._get(g)
                self._check_run(run)
                self._ref.pop(g, None)
                self._owner.pop(g, None)
                self._got.pop(g, None)
                self._next_g = g + 1
                self._pos = (self._next_g // nb, self._next_g % nb) \
                    if self._next_g < self._end_g else (g // nb + 1, 0)
                self._reap()
                self._hand_out()  # refill the window while the trainer works
                if v is None:  # every sample skipped
                    continue
                self._taken += 1
                self._samples += len(v[1])
                yield self._tensors(v)
        finally:
            if self._run == run:
                self._run = 0
                self._saved = self._pos
                if self._next_g >= self._end_g:  # the next epoch's, kept
                    self._carry_from = self._end_g
                else:  # left early: drop the queued work
                    self._drop_work()

    def _supersede(self, why):
        if self._run:
            self._ended[self._run] = why
        self._run = 0

    def _check_run(self, run):
        """Raises RuntimeError when `run` is no longer the live iteration
        (a newer iter(loader), set_epoch or load_state_dict ended it),
        rather than stop as if its epoch were done."""
        if self._run != run:
            why = self._ended.pop(run, "a newer iteration")
            raise RuntimeError(
                f"this sluice.ray.DataLoader iterator was superseded by {why}: "
                "one DataLoader streams one iteration at a time, and "
                "starting another ends the one before; iterate it once per "
                "epoch, or make two DataLoaders for two streams")

    def _drop_work(self):
        """Forgets this iteration's work. Chunks queued on the actors are
        not cancelled: ray.cancel of a queued actor task can leave the
        actor's next tasks unsent (seen here: the trainer waited forever
        for an idle actor; ray-project/ray#60850); they run out, and leave
        the actors' queues as they complete (depth counts them)."""
        self._ref, self._owner, self._redo, self._got = {}, {}, [], {}
        self._carry_from = None

    # A share group's jobs receive the same chunk objects (SharedLoader):
    # their images are copied into this job's memory (below).
    _copy_images = False

    def _tensors(self, v):
        images, labels = v
        # Labels are copied out (a few bytes): a view would keep the whole
        # chunk object, its images too, in the object store for as long as
        # the caller keeps them (losses.append(y)).
        labels = labels.copy()
        if self._torch is None:  # read-only views: numpy refuses writes
            return images, labels
        # torch.from_numpy wraps a read-only view as a writable tensor; an
        # in-place op (x.mul_) then writes the object store's copy, which
        # every job of a share group receives. On a device, .to() copies.
        if self._copy_images and (self.device is None or self.device.type == "cpu"):
            images = images.copy()
        with warnings.catch_warnings():  # the object store's views are
            warnings.simplefilter("ignore", UserWarning)  # read-only
            x, y = self._torch.from_numpy(images), self._torch.from_numpy(labels)
        if self.device is not None:
            x = x.to(self.device, non_blocking=True)
            y = y.to(self.device, non_blocking=True)
        return x, y

    # ------------------------------------------------------------ position

    def set_epoch(self, epoch):
        """The next iteration streams epoch `epoch` from its first batch,
        or, right after load_state_dict of a position in that epoch, from
        that position (the resume loop's set_epoch at the top of the
        epoch), as sluice.torch.DataLoader."""
        epoch = operator.index(epoch)
        if epoch < 0:
            raise ValueError("epoch must be >= 0")
        if self._resume is not None and self._resume[0] == epoch:
            self._start = self._saved = self._resume
        else:
            self._resume = None
            self._start = self._saved = (epoch, 0)
        self._supersede("set_epoch()")

    def state_dict(self):
        """The exact position after the batches consumed so far."""
        epoch, batch = self._pos if self._run else self._saved
        return {"epoch": epoch, "batch": batch, "seed": self.seed,
                "batch_size": self.batch_size, "world_size": self.world_size,
                "rank": self.rank, "drop_last": self.drop_last,
                "shuffle": self.shuffle,
                "batches_per_epoch": self.batches_per_epoch}

    def load_state_dict(self, state):
        """The next iteration yields exactly the batches of state's epoch
        not yet consumed when it was saved."""
        mine = self.state_dict()
        for k in _STATE_CHECKED:
            if k in state and state[k] != mine[k]:
                raise ValueError(f"state_dict was saved with {k}={state[k]!r}, "
                                 f"this loader has {mine[k]!r}")
        self._start = self._saved = self._resume = (int(state["epoch"]),
                                                    int(state["batch"]))
        self._supersede("load_state_dict()")

    def skipped(self):
        """The messages of the samples skipped so far under on_error='skip'
        ("epoch E: FILE: cause") and the source's warnings, as
        sluice.torch.DataLoader.skipped(): the started actors', each
        message once (a sample prepared twice, after an actor died, and
        the warnings every actor found), those of batches prepared ahead
        (up to the next epoch) included, and those of retired actors
        (set_actors, autoscale). An actor that died took its messages
        with it. Asks each actor (a busy one answers after its chunk)."""
        refs = []
        for a in self._actors:
            if a.ready.done():
                try:
                    refs.append(a.handle.skipped.remote())
                except Exception:  # gone meanwhile
                    pass
        return _merge_skipped(self._ray, refs, self._retired_skipped)

    def stats(self):
        """Counters and the actors' decisions (a dict); no call to the
        actors (len(skipped()) counts the skipped samples). The object
        store's share: window (batches that may be in flight ahead of the
        trainer now), object_store_bytes (the budget), batch_bytes (the
        largest batch's, 0 before the first chunk), in_flight (batches
        handed out, not taken), budget_held (hand-outs at which the
        budget, not the count window, kept an actor's slot empty)."""
        return {"batches": self._taken, "samples": self._samples,
                "wait_s": self._wait_s, "actors": len(self._live()),
                "actors_unplaced": len(self._live()) - len(self._placed()),
                "target_actors": self._target,
                "actors_started": self._next_id, "actors_failed": self._failed,
                "rehanded_batches": self._rehanded,
                "batches_completed": self._completed,
                "tasks": self._tasks, "batches_handed": self._handed,
                "window": self._window,
                "object_store_bytes": self.object_store_bytes,
                "batch_bytes": self._batch_bytes,
                "in_flight": len(self._ref),
                "budget_held": self._budget_held,
                "per_actor": {a.id: a.batches for a in self._actors},
                "decisions": list(self._decisions)}

    def cache_stats(self):
        """The actors' caches: storage reads per epoch (by the epoch of
        the batch that needed the sample), and with partition=True local
        and remote hits and misses, bytes from other actors, fallback
        reads (sluice.ray_cache); entries and bytes held now. Asks the
        live actors (an actor busy preparing answers after its chunk,
        unless partition=True)."""
        from .ray_cache import merge_stats
        got = []
        for a in self._actors:
            try:
                got.append(self._ray.get(a.handle.cache_stats.remote(), timeout=60))
            except Exception:  # gone meanwhile: its counters with it
                pass
        return merge_stats(got)

    def _stop_telemetry(self):
        if getattr(self, "_telemetry", None) is not None:
            self._telemetry.close()  # its last line while the actors live
            self._telemetry = None

    def close(self):
        """Kills the actors (and writes the telemetry's last line)."""
        self._stop_telemetry()
        for a in self._actors:
            try:
                self._ray.kill(a.handle)
            except Exception:
                pass
        self._actors = []

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def _init_error(e):
    """The error a preparer's constructor raised (a bad option, a source
    it cannot open), as the local loader would raise it: Ray reports it
    as ActorDiedError, its message ending in the original exception's
    last traceback line ("ValueError: ...")."""
    import re
    import sluice
    kinds = {"ValueError": ValueError, "TypeError": TypeError,
             "FileNotFoundError": FileNotFoundError, "Error": sluice.Error,
             "NotFoundError": sluice.NotFoundError}
    for line in reversed(str(e).splitlines()):
        m = re.match(r"\s*(?:[\w.]+\.)?(\w+): (.+)", line)
        if m and m[1] in kinds:
            return kinds[m[1]](f"sluice.ray: a preparer could not start: {m[2]}")
    return RuntimeError(f"sluice.ray: a preparer could not start: {e}")


def _unplaced_message(ray, actor_options, waiting, live, meanwhile):
    """Says that `waiting` of `live` actors could not be placed yet,
    naming what each asks and what the cluster has."""
    o = actor_options
    asks = {"CPU": o.get("num_cpus", 1), "GPU": o.get("num_gpus", 0)}
    asks.update(o.get("resources") or {})
    total, free = ray.cluster_resources(), ray.available_resources()
    return (f"sluice.ray: {waiting} of {live} actors could not be "
            "placed yet (Ray waits for resources): each asks " +
            ", ".join(f"{k} {v:g}" for k, v in asks.items() if v) +
            "; the cluster has " +
            ", ".join(f"{k} {total.get(k, 0):g} ({free.get(k, 0):g} free)"
                      for k, v in asks.items() if v) +
            f". {meanwhile} (num_actors or actor_options= ask for less)")


def _merge_skipped(ray, refs, msgs=(), timeout=60):
    """The messages the preparers' skipped() answered (refs), after msgs,
    each once, in the order first seen."""
    msgs = list(msgs)
    for r in refs:
        try:
            msgs += ray.get(r, timeout=timeout)
        except Exception:  # an actor gone meanwhile: its messages with it
            pass
    return list(dict.fromkeys(msgs))


def _lost(ray):
    """The errors of a task whose actor (process, node) is gone."""
    x = ray.exceptions
    return (x.RayActorError, x.ObjectLostError, x.WorkerCrashedError)


def _dist_defaults(torch, rank, world_size):
    dist = getattr(torch, "distributed", None) if torch is not None else None
    if dist is not None and dist.is_available() and dist.is_initialized():
        if rank is None:
            rank = dist.get_rank()
        if world_size is None:
            world_size = dist.get_world_size()
    return (0 if rank is None else rank, 1 if world_size is None else world_size)
