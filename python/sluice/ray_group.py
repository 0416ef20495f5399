"""One preparation for several jobs: sluice.ray.DataLoader(..., share=...).

Jobs (separate processes, drivers of one Ray cluster: a hyper-parameter
search) that read the same data with the same seed, transforms and batch
size attach to one preparer group and each receive every batch; each batch
is prepared once::

    ray.init(address="auto")
    loader = sluice.ray.DataLoader(source="data/train", batch_size=64,
                                   seed=0, num_actors=4, share="trial-set")
    start = loader.state_dict()["epoch"]   # where this job joined
    for epoch in range(start, epochs):
        for images, labels in loader:
            ...
    loader.close()                           # leave the group

The group is a detached named Ray actor (`_Group`, namespace "sluice")
found by the share name; its key (data path, batch and image size, seed,
shuffle, rank / world, dtype, transforms: every option that changes the
stream) must match, else attaching raises ValueError naming what differs.
It owns the preparer actors (sluice.ray's, each a sluice.Loader running
plans) and hands them chunks of batches; each chunk is one object in Ray's
object store that every job fetches (zero-copy on the same node).

- **Pace.** The group prepares within a window of `window` batches past
  the slowest attached job's position (CoorDL's rule): the jobs move
  together, a faster one waits for the slowest at most `window` ahead.
  `object_store_bytes` narrows the window to the batches whose bytes fit
  (once the first chunk told a batch's size; never below one chunk per
  preparer): what the group holds in Ray's object store, once for all
  its jobs.
  A batch is released once every attached job is past it or left. A job
  asks the group for chunk objects once per half window (when fewer than
  half the window's are known ahead), not per batch, so the group hears
  a position up to half a window late; a job tells its position at the
  end of an iteration, and within half a second when it pauses.
- **Late join: the next epoch.** A job attaching while the group is inside
  epoch e starts at epoch e + 1's first batch (at e's first batch when the
  group is exactly there, or with join="now" at the slowest job's batch):
  whole epochs, nothing prepared twice. state_dict() says where it joined.
  Jobs attaching before any job asked for a batch keep their own
  positions (set_epoch / load_state_dict as alone).
- **Leave early**: close(), or the process ends. A job's process owns a
  small "life line" actor on its node, which Ray ends with the process
  (a driver killed, a Ray Tune trial's actor stopped): the group drops
  the job within seconds of that, unless it still pings. A job silent
  for `lease` seconds is dropped too (a heartbeat thread pings every
  second for a live one). The last job to leave ends the group and its
  actors; a group no job attached to for `lease` seconds ends too (its
  jobs' processes ended while they waited for a preparer, or before
  their attach arrived).
- **Per job, as a single job**: order, set_epoch, state_dict /
  load_state_dict. A job whose position is behind the group's released
  batches (set_epoch / load_state_dict backwards) has them prepared again
  (counted as reprepared), holds the others within `window` of it, and
  warns once.
- **Failures**: a preparer that dies has its unreleased batches prepared
  by the others (a replacement is started); a job whose chunk object was
  lost asks again and gets the new one.
"""
import asyncio
import hashlib
import json
import os
import threading
import time
import uuid
import warnings
import weakref

from .ray import (_START_WARN_S, DataLoader, _batch_nbytes, _Chunk, _init_error, _lost,
                  _merge_skipped, _Preparer, _unplaced_message, _window, log)

__all__ = ["SharedLoader"]

NAMESPACE = "sluice"
# Options that change speed, not the stream: not in the group's key.
_SPEED_ONLY = ("threads",)
# A job that took no batch for this long tells the group its position
# (SharedLoader._heartbeat).
_STALL_S = 0.25
# Seconds between a job's pings (at most; lease / 4 when shorter), and
# how long a job whose life line ended may stay silent before it is
# dropped (a live one pings within _PING_S).
_PING_S = 1.0
_GONE_S = 3.0


class _Life:
    """A job process's life line: an actor the process owns, so Ray ends
    it with the process (fate-sharing; placed on the process's node). The
    group awaits until_end; its error tells that the process ended,
    without waiting for the job's lease."""

    async def until_end(self):
        await asyncio.Event().wait()


_lives = {}  # the process's Ray worker id -> its _Life actor


def _life(ray):
    """This process's life line (one for all its jobs; a new one after
    ray.shutdown() and init())."""
    ctx = ray.get_runtime_context()
    me = ctx.get_worker_id()
    h = _lives.get(me)
    if h is None:
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy
        h = ray.remote(_Life).options(
            num_cpus=0, max_restarts=0,
            scheduling_strategy=NodeAffinitySchedulingStrategy(
                node_id=ctx.get_node_id(), soft=True)).remote()
        _lives.clear()  # a handle of an ended Ray session
        _lives[me] = h
    return h


class _GroupPreparer(_Preparer):
    """sluice.ray's preparer; prepare_marked adds a small second return
    value the group awaits (never the chunk itself, which would pull its
    batches into the group's process): the largest batch's bytes, which
    the byte budget goes by."""

    def prepare_marked(self, batches):
        out = self.prepare(batches)
        return out, _batch_nbytes(out)


class _Prep:
    def __init__(self, handle, ident):
        self.handle, self.id = handle, ident
        self.busy = 0       # chunks queued
        self.batches = 0
        self.dead = False


class _Group:
    """The preparer group: a detached async Ray actor. Jobs call attach,
    want (their position and the chunk objects they lack), ping, leave."""

    def __init__(self, name, key, fields, source, batch_size, image_size,
                 options, actor_options, num_actors, chunk, depth, window,
                 lease, store_bytes=0):
        import ray
        self._ray = ray
        self.name, self.key, self.fields = name, key, fields
        self.args = (source, batch_size, image_size, options)
        self.actor_options = dict(actor_options)
        self.chunk, self.depth, self.lease = chunk, depth, lease
        # The count window (window=, at least a chunk per queue slot) and
        # the byte budget (object_store_bytes=), which narrows it once a
        # batch's bytes are known (eff_window).
        self.window = max(window or 0, num_actors * depth * chunk)
        self.store_bytes, self.batch_bytes = store_bytes, 0
        self.target = num_actors
        self.cls = ray.remote(_GroupPreparer)
        self.preps, self.next_id = [], 0
        # id -> [position (None until it first asks, unless it joined a
        # group under way), last heard (monotonic), when its life line
        # ended (None: it lives)]
        self.jobs = {}
        self.ref, self.owner = {}, {}  # g -> (its chunk's object, [g...]), preparer
        self.redo = []          # batches to prepare (again) first
        self.hand_g = 0         # next batch of the continuous hand-out
        self.nb = None
        self.waiting = set()    # jobs whose attach waits for a preparer
        self.closed = False
        self.counts = {"prepared": 0, "reprepared": 0, "preparers_failed": 0,
                       "jobs_attached": 0, "jobs_left": 0, "jobs_dropped": 0,
                       "wants": 0, "budget_held": 0}
        self.per_epoch = {}     # epoch -> batches prepared
        self.events = []        # (time, what)
        self.changed = None
        self.spawn(num_actors)
        # Drops silent jobs; ends a group no job attached to (its
        # creator's process ended before its attach arrived).
        asyncio.get_event_loop().create_task(self.reap_jobs())

    # ------------------------------------------------------------ preparers

    def spawn(self, n):
        for _ in range(n):
            h = self.cls.options(**self.actor_options).remote(*self.args)
            self.preps.append(_Prep(h, self.next_id))
            self.next_id += 1

    def eff_window(self):
        """Batches the group may hold past the slowest job now: the count
        window narrowed by the byte budget (sluice.ray's one rule)."""
        return _window(self.window, self.store_bytes, self.batch_bytes,
                       len(self.preps), self.chunk)

    def lo(self):
        ps = [p for p, *_ in self.jobs.values() if p is not None]
        return min(ps) if ps else None

    def send(self, p, gs):
        nb = self.nb
        chunk, marker = p.handle.prepare_marked.options(num_returns=2).remote(
            [(g // nb, g % nb) for g in gs])
        for g in gs:
            self.ref[g], self.owner[g] = (chunk, gs), p
            self.counts["prepared"] += 1
            self.per_epoch[g // nb] = self.per_epoch.get(g // nb, 0) + 1
        p.busy += 1
        asyncio.get_event_loop().create_task(self.watch(p, gs, marker))

    async def watch(self, p, gs, marker):
        try:
            self.batch_bytes = max(self.batch_bytes, await marker)
            p.batches += len(gs)
        except _lost(self._ray) as e:
            self.failed(p, e)
        except Exception:  # the data's own error: each job meets it at its get
            pass
        p.busy -= 1
        self.hand_out()

    def failed(self, p, err):
        if p.dead:
            return
        p.dead = True
        self.preps.remove(p)
        self.counts["preparers_failed"] += 1
        lost = sorted(g for g, o in self.owner.items() if o is p)
        for g in lost:
            del self.ref[g], self.owner[g]
        self.redo = sorted(set(self.redo) | set(lost))
        self.counts["reprepared"] += len(lost)
        self.note(f"preparer {p.id} died ({type(err).__name__}); "
                  f"{len(lost)} batches re-handed")
        if len(self.preps) < self.target:
            self.spawn(self.target - len(self.preps))

    def hand_out(self):
        """Re-handed batches first (least busy preparer, beyond depth), then
        the continuous range within window of the slowest job."""
        lo = self.lo()
        if self.nb is None or lo is None or self.closed:
            return
        self.release(lo)
        if not self.preps:
            self.spawn(self.target)
        while self.redo:
            gs, self.redo = self.redo[:self.chunk], self.redo[self.chunk:]
            self.send(min(self.preps, key=lambda p: p.busy), gs)
        self.hand_g = max(self.hand_g, lo)
        win = self.eff_window()
        for p in sorted(self.preps, key=lambda p: p.busy):
            while p.busy < self.depth:
                hi = min(lo + win, self.hand_g + self.chunk)
                if hi - self.hand_g < self.chunk:  # whole chunks only
                    break
                self.send(p, list(range(self.hand_g, hi)))
                self.hand_g = hi
            else:
                continue
            # A free slot and no whole chunk fits: none fits the others'
            # either. Counted once per hand-out when the count would fit one.
            if lo + self.window >= self.hand_g + self.chunk:
                self.held_by_budget(win)
            break
        self.wake()

    def held_by_budget(self, win):
        """The byte budget, not the count window, kept a preparer's free
        slot empty: counted (budget_held) and noted once (events)."""
        self.counts["budget_held"] += 1
        if self.counts["budget_held"] == 1:
            self.note(f"object_store_bytes {self.store_bytes} holds the preparers back: "
                      f"{win} batches of {self.batch_bytes} bytes past the slowest "
                      f"job at most, not {self.window}")

    def store(self):
        """The window and the byte budget, as a reply tells a job."""
        return {"window": self.eff_window(), "object_store_bytes": self.store_bytes,
                "batch_bytes": self.batch_bytes,
                "budget_held_total": self.counts["budget_held"]}

    def release(self, lo):
        for g in [g for g in self.ref if g < lo]:
            del self.ref[g], self.owner[g]

    def wake(self):
        if self.changed is not None:
            self.changed.set()
            self.changed = None

    def note(self, what):
        self.events.append((time.time(), what))

    # ------------------------------------------------------------ jobs

    async def attach(self, job, key, fields, join, life=None):
        """Registers job (life: its process's _Life); returns where it
        starts (None: where it asks first, no job having asked yet) and
        the epoch's size."""
        if self.closed:
            return {"closed": True}
        if key != self.key:
            diff = sorted(k for k in set(fields) | set(self.fields)
                          if fields.get(k) != self.fields.get(k))
            return {"mismatch": {k: (self.fields.get(k), fields.get(k)) for k in diff}}
        if self.nb is None:  # no job attached yet
            r = await self.first_info(job, life)
            if r is not None:
                return r
        nb, lo = self.nb, self.lo()
        if lo is None:
            start = None  # no job under way: its own position
        elif join == "now" or lo % nb == 0:
            start = lo
        else:
            start = (lo // nb + 1) * nb
        self.jobs[job] = [start, time.monotonic(), None]
        if life is not None:
            asyncio.get_event_loop().create_task(self.watch_life(job, life))
        self.counts["jobs_attached"] += 1
        self.note(f"job {job} attached " + ("at its own position" if start is None else
                                            f"at epoch {start // nb} batch {start % nb}"))
        return dict(self.store(), start=start, batches_per_epoch=nb,
                    num_samples=self.samples)

    async def first_info(self, job, life):
        """Waits for the first preparer to start (Ray may wait for
        resources: the job warns meanwhile) and learns the epoch's size;
        None when it did, else attach's answer. The group ends when the
        preparers cannot start (a source missing, an option refused: the
        job raises their error), or when every job that waited here has
        ended (their processes killed while Ray could not place a
        preparer): its name is then free for a job that can start them."""
        self.waiting.add(job)
        infos = [asyncio.ensure_future(p.handle.info.remote()) for p in self.preps]
        ended = asyncio.ensure_future(life.until_end.remote()) if life else None
        try:
            done, _ = await asyncio.wait(infos + [ended] if ended else infos,
                                         return_when=asyncio.FIRST_COMPLETED)
            if self.nb is not None:  # another waiting job learned it
                return None
            first = next((f for f in done if f is not ended), None)
            if first is None:  # this job's process ended
                self.waiter_ended(job)
                return {"closed": True}
            try:
                info = first.result()
            except Exception as e:
                self.close()
                return {"error": str(e)}
            self.nb, self.samples = info["batches_per_epoch"], info["num_samples"]
            return None
        except asyncio.CancelledError:  # Ray cancels a dead caller's call
            self.waiter_ended(job)
            raise
        finally:
            self.waiting.discard(job)
            for f in infos + [ended] if ended else infos:
                f.cancel()

    def waiter_ended(self, job):
        """job's process ended while it waited in first_info: the group
        ends when no other job waits or is attached."""
        self.waiting.discard(job)
        if not self.jobs and not self.waiting and not self.closed:
            self.note(f"job {job} ended before a preparer started")
            self.close()

    async def want(self, job, g, n, known, wait_s):
        """job's position is g; returns {batch: [its chunk's object, the
        chunk's batches]} for the batches of [g, g + n) handed out and not
        in `known`, waiting up to wait_s for g itself, and the window and
        byte budget now (store()). A job asks about once per half window
        (SharedLoader._hand_out), so this is per window, not per batch."""
        j = self.jobs.get(job)
        if j is None:
            return {"detached": True}
        j[0], j[1] = g, time.monotonic()
        self.counts["wants"] += 1
        lo = self.lo()
        # Behind the continuous hand-out and no longer held: again.
        win = self.eff_window()
        again = [x for x in range(g, g + n)
                 if x < self.hand_g and x not in self.ref and x < lo + win
                 and x not in self.redo]
        if again:
            self.redo = sorted(self.redo + again)
            self.counts["reprepared"] += len(again)
        self.hand_out()
        deadline = time.monotonic() + wait_s
        while g not in self.ref and not self.closed:
            left = deadline - time.monotonic()
            if left <= 0:
                break
            if self.changed is None:
                self.changed = asyncio.Event()
            try:
                await asyncio.wait_for(self.changed.wait(), left)
            except asyncio.TimeoutError:
                break
        known = set(known)
        r = dict(self.store(), refs={x: list(self.ref[x]) for x in range(g, g + n)
                                     if x in self.ref and x not in known})
        if again:  # the job says why, once
            others = [p for j, (p, *_) in self.jobs.items() if j != job and p is not None]
            r["again"] = [len(again), min(others) if others else None, self.nb]
        return r

    async def ping(self, job, g=None):
        """The job is alive; g: its position, when it stopped taking
        batches since it last asked (the pace and join="now" go by it).
        Forward only: a ping read before a later want may arrive after it,
        and a position moved back under released batches would have them
        prepared again."""
        j = self.jobs.get(job)
        if j is None:
            return
        j[1] = time.monotonic()
        if g is not None and j[0] is not None and g > j[0]:
            j[0] = g
            self.hand_out()

    async def leave(self, job, why="left"):
        if self.jobs.pop(job, None) is None:
            return
        self.counts["jobs_left" if why == "left" else "jobs_dropped"] += 1
        self.note(f"job {job} {why}")
        if not self.jobs:
            self.close()
        else:
            self.hand_out()  # the slowest may have gone: release, go on

    async def watch_life(self, job, life):
        """Marks job's process ended when its life line ends (reap_jobs
        drops it unless it pings again: a life line may end otherwise)."""
        try:
            await life.until_end.remote()
        except Exception:
            pass
        j = self.jobs.get(job)
        if j is not None:
            j[2] = time.monotonic()

    async def reap_jobs(self):
        idle = time.monotonic()
        while not self.closed:
            await asyncio.sleep(min(self.lease / 4, _GONE_S / 4))
            now = time.monotonic()
            if self.jobs or self.waiting:
                idle = now
            elif now - idle > self.lease:
                self.note(f"no job attached for {self.lease:g} s")
                self.close()
                return
            for job, (_, seen, gone) in list(self.jobs.items()):
                if gone is not None and now - max(seen, gone) > min(_GONE_S, self.lease):
                    await self.leave(job, "dropped (its process ended)")
                elif now - seen > self.lease:
                    await self.leave(job, f"dropped (silent {now - seen:.0f} s)")

    def close(self):
        """The last job left: the actors go, and this actor (its name is
        free for a new group)."""
        self.closed = True
        self.wake()
        for p in self.preps:
            try:
                self._ray.kill(p.handle)
            except Exception:
                pass
        self.preps = []
        self.ref, self.owner = {}, {}

        async def end():
            await asyncio.sleep(0.2)  # the leave call returns first
            self._ray.kill(self._ray.get_runtime_context().current_actor)
        asyncio.get_event_loop().create_task(end())

    async def set_preparers(self, n):
        self.target = n
        if n > len(self.preps):
            self.spawn(n - len(self.preps))
        self.window = max(self.window, n * self.depth * self.chunk)
        self.hand_out()

    async def stats(self):
        return dict(self.counts, name=self.name, jobs=len(self.jobs),
                    positions={j: p for j, (p, *_) in self.jobs.items()},
                    preparers=len(self.preps), window=self.eff_window(),
                    window_batches=self.window, object_store_bytes=self.store_bytes,
                    batch_bytes=self.batch_bytes,
                    prepared_per_epoch=dict(self.per_epoch),
                    held=len(self.ref), events=list(self.events),
                    waiting=sorted(self.waiting),
                    per_preparer={p.id: p.batches for p in self.preps})

    async def skipped(self):
        """Each preparer's skipped() messages (a list per preparer)."""
        return [p.handle.skipped.remote() for p in self.preps]

    async def cache_stats(self):
        """Each preparer's cache_stats() (sluice.ray_cache.merge_stats
        merges them)."""
        return [p.handle.cache_stats.remote() for p in self.preps]

    async def pids(self):
        """The group's and its preparers' process ids (benchmarks)."""
        ps = [await p.handle.pid.remote() for p in self.preps]
        return {"group": os.getpid(), "preparers": ps}


def _heartbeat(ref, beat, lease):
    """A job's heartbeat thread (ref: a weak reference to its
    SharedLoader): pings every _PING_S (lease / 4 when shorter; the group
    drops a silent job),
    and tells the group the position of a job that stopped taking batches
    (a pause, an evaluation): asking once per half window, its last ask
    may be up to half a window behind, which would hold the others back
    and start a join="now" job there. Ends with the loader (or close())."""
    every = min(lease / 4, _PING_S)
    tick = min(every, _STALL_S)
    last_ping = time.monotonic()
    seen = None
    while not beat.wait(tick):
        dl = ref()  # held for this tick only, never across a wait
        if dl is None:
            return
        g = dl._next_g if dl._run else None
        stalled = g is not None and g == seen and dl._told is not None \
            and g > dl._told
        seen = g
        now = time.monotonic()
        if stalled or now - last_ping >= every:
            try:
                if stalled:
                    dl._tell(g)
                else:
                    dl._group.ping.remote(dl._job)
            except Exception:
                return
            last_ping = now
        dl = None


def _leave(group, job, beat):
    """The finalizer of a SharedLoader collected without close(): the
    heartbeat stops and the job leaves the group (not awaited: this may
    run in any thread, at a collection)."""
    beat.set()
    try:
        group.leave.remote(job)
    except Exception:  # Ray shut down: the group drops the silent job
        pass


def _key(source, batch_size, image_size, options):
    fields = {"source": os.path.realpath(source) if isinstance(source, str) else repr(source),
              "batch_size": batch_size, "image_size": image_size}
    fields.update({k: v for k, v in options.items() if k not in _SPEED_ONLY})
    fields = json.loads(json.dumps(fields, sort_keys=True, default=repr))
    key = hashlib.sha1(json.dumps(fields, sort_keys=True).encode()).hexdigest()
    return key, fields


class SharedLoader(DataLoader):
    """sluice.ray.DataLoader(..., share=NAME, join="epoch", window=None,
    lease=30.0): this job's view of a shared preparer group (see the
    module's doc). num_actors, actor_threads, actor_options, chunk and
    depth are the group's, taken from the job that creates it. window:
    batches the group prepares past its slowest job (default num_actors x
    depth x chunk); object_store_bytes (sluice.ray.DataLoader's: default a
    quarter of the cluster's object store over world_size) narrows it to
    the batches whose bytes fit, the group's for all its jobs (each
    batch is one object every job receives), never below one chunk per
    preparer; both the creating job's. group_stats() says the window
    now, window_batches (the count), object_store_bytes, batch_bytes and
    budget_held (hand-outs the budget held back). autoscale and
    partition are not offered here.

    With world_size > 1 (given, or torch.distributed's: Ray Train's
    ranks) share="NAME" names one group per rank, "NAME-rankRofW": each
    rank's jobs share their rank's batches (share=True's name, from the
    options, includes the rank already). skipped() and cache_stats() are
    the group's preparers'. A job's image tensors are its own copies (an
    in-place op never reaches the other jobs)."""

    _copy_images = True  # the other jobs receive the same objects

    def __init__(self, *args, share=True, join="epoch", window=None,
                 lease=30.0, **kw):
        if kw.get("autoscale"):
            raise ValueError("share= and autoscale= cannot be combined")
        if kw.get("partition"):
            raise ValueError("share= and partition= cannot be combined: a share "
                             "group's preparers do not partition their cache "
                             "(with cache_bytes=, each caches what it reads)")
        if join not in ("epoch", "now"):
            raise ValueError("join must be 'epoch' or 'now'")
        self._share, self._join = share, join
        self._window, self._lease = window, float(lease)
        super().__init__(*args, **kw)

    def _start_work(self, num_actors):
        ray = self._ray
        key, fields = _key(self.source, self.batch_size, self.image_size, self._options)
        name = "sluice-share-" + (self._share if isinstance(self._share, str) else key[:16])
        if isinstance(self._share, str) and self.world_size > 1:  # a group per rank
            name += f"-rank{self.rank}of{self.world_size}"
        self._job = uuid.uuid4().hex[:12]
        self._group_name = name
        last = "closed"
        for _ in range(50):  # a group ending as we come: a new one
            g = ray.remote(_Group).options(
                name=name, namespace=NAMESPACE, lifetime="detached",
                get_if_exists=True, num_cpus=0, max_restarts=0,
                max_concurrency=1000)
            self._group = g.remote(name, key, fields, self.source, self.batch_size,
                                   self.image_size, self._options, self._actor_options,
                                   num_actors, self.chunk, self.depth, self._window,
                                   self._lease, self.object_store_bytes)
            try:
                ref = self._group.attach.remote(self._job, key, fields, self._join,
                                                _life(ray))
                if not ray.wait([ref], timeout=_START_WARN_S)[0]:
                    # The group waits for a preparer to start.
                    msg = _unplaced_message(ray, self._actor_options, num_actors,
                                            num_actors, "The job waits for one")
                    log.warning("%s", msg)
                    warnings.warn(msg, RuntimeWarning, stacklevel=4)
                r = ray.get(ref)
            except ray.exceptions.RayActorError as e:  # the group ended
                r, last = {"closed": True}, e
            if "error" in r:  # the preparers' own error (the group ended)
                raise _init_error(RuntimeError(r["error"])) from None
            if "mismatch" in r:
                raise ValueError(
                    f"share group {name!r} prepares other batches: " +
                    ", ".join(f"{k}: group {a!r}, this job {b!r}"
                              for k, (a, b) in r["mismatch"].items()))
            if not r.get("closed"):
                break
            time.sleep(0.1)
        else:
            raise RuntimeError(f"sluice.ray: cannot attach to share group {name!r}: "
                               f"it ended at each of 50 tries; the last: {last}")
        self.batches_per_epoch = nb = r["batches_per_epoch"]
        self.num_samples = r["num_samples"]
        self._store_reply(r)
        self.object_store_bytes = r["object_store_bytes"]  # the group's
        if r["start"] is not None:  # joined a group under way
            self._start = self._saved = self._pos = divmod(r["start"], nb)
        self._cache, self._asked = {}, None  # g -> its _Chunk, known ahead
        self._told = None  # the position the group last heard
        self._left = False
        self._warned_again = False  # asked for released batches (_merge)
        self._beat = threading.Event()
        # A loader deleted without close() leaves the group when it is
        # collected (the others went on waiting for it: the heartbeat
        # thread held it and kept it alive in the group); the thread holds
        # it weakly, and the finalizer holds neither it nor its thread.
        self._finalizer = weakref.finalize(self, _leave, self._group, self._job,
                                           self._beat)
        t = threading.Thread(target=_heartbeat, args=(weakref.ref(self),
                                                      self._beat, self._lease),
                             daemon=True, name="sluice-share-heartbeat")
        t.start()

    def _store_reply(self, r):
        """The group's window (batches: the count narrowed by the byte
        budget) and budget, as its last reply said them: how far this job
        asks ahead, and its telemetry's "ray" fields."""
        self._group_window = r["window"]
        self._group_store = {k: r[k] for k in ("window", "object_store_bytes",
                                               "batch_bytes", "budget_held_total")}

    def _tell(self, g):
        """The group hears position g (no answer awaited)."""
        self._told = g
        self._group.ping.remote(self._job, g)

    def _batches(self, run):
        try:
            yield from super()._batches(run)
        finally:
            # At an iteration's end (or when it is left): the batches
            # behind the job are released now, not at its next ask.
            if self._run == 0 and not self._left and self._told is not None \
                    and self._next_g > self._told:
                try:
                    self._tell(self._next_g)
                except Exception:  # Ray shut down (a generator collected late)
                    pass

    # The work layer: the group does it; this job asks for its batches.

    def _hand_out(self):
        """After each take (and at an iteration's start): when fewer than
        half the window's batches are known ahead, tells the group this
        job's position and asks for the batches ahead, not waiting. One
        call per half window rather than per batch: the group's work and
        Ray's calls were most of what a delivery cost beside the batch
        itself; the group then hears a position up to half a window late
        (the window's other half keeps the preparers busy)."""
        if self._run and self._asked is None:
            g = self._next_g
            ahead = sum(1 for x in self._cache if x >= g)
            if ahead < max(1, self._group_window // 2):
                self._asked = self._ask(g, 0.0)

    def _ask(self, g, wait_s):
        known = [x for x in self._cache if x >= g]
        self._told = g
        return self._group.want.remote(self._job, g, self._group_window, known, wait_s)

    def _merge(self, ref):
        r = self._ray.get(ref)
        if r.get("detached"):
            raise RuntimeError(f"sluice.ray: this job was dropped from share group "
                               f"{self._group_name!r} (silent for {self._lease} s)")
        if r.get("again") and not self._warned_again:
            self._warned_again = True
            n, lo, nb = r["again"]
            g = self._next_g
            msg = (f"sluice.ray: share group {self._group_name!r}: this job "
                   f"(at epoch {g // nb} batch {g % nb}) asks for {n} batches the "
                   "group had released" +
                   (f" (the slowest other job is at epoch {lo // nb} batch {lo % nb})"
                    if lo is not None else "") +
                   ": they are prepared again for it alone, and it holds the "
                   "others back. A job that joined late starts at "
                   "state_dict()['epoch'] (not at set_epoch(0)); jobs that start "
                   "together begin iterating together (group_stats()['reprepared'] "
                   "counts these)")
            log.warning("%s", msg)
            warnings.warn(msg, RuntimeWarning, stacklevel=5)
        chunks = {}  # one _Chunk (one future) per chunk: fetched when ready
        for g, (ref, gs) in r["refs"].items():
            if ref not in chunks:
                chunks[ref] = _Chunk(ref, gs)
            self._cache[g] = chunks[ref]
        self._store_reply(r)  # set_actors, a batch's bytes may have moved it

    def _get(self, g):
        """Batch g: fetched with its chunk (by Ray's thread, as soon as it
        is ready: the chunk's future); the chunk's other batches wait in
        self._got for their take."""
        ray = self._ray
        for k in [k for k in self._cache if k < g]:
            del self._cache[k]
        for k in [k for k in self._got if k < g]:
            del self._got[k]
        tries = 0
        while True:
            t0 = time.monotonic()
            if self._asked is not None:
                self._merge(self._asked)
                self._asked = None
            if g in self._got:
                self._cache.pop(g, None)
                return self._got[g]
            chunk = self._cache.get(g)
            if chunk is None:
                self._merge(self._ask(g, 0.5))
                self._wait_s += time.monotonic() - t0
                continue
            try:
                values = chunk.value()
                for x, v in zip(chunk.gs, values):
                    if x > g and self._cache.get(x) is chunk:
                        self._got[x] = v
                v = values[chunk.gs.index(g)]
            except _lost(ray):  # its preparer died: the group re-hands it
                self._cache.clear()
                tries += 1
                if tries > 200:
                    raise
                time.sleep(0.05)
                continue
            except ray.exceptions.RayTaskError as e:
                raise e.as_instanceof_cause() from None
            finally:
                self._wait_s += time.monotonic() - t0
            del self._cache[g]
            return v

    def _reap(self):
        pass

    def _drop_work(self):
        self._cache, self._asked, self._got = {}, None, {}
        self._carry_from = None

    def _live(self):
        return []

    # Group-level controls.

    def set_actors(self, n, reason="set_actors"):
        """The group's preparer count (more only; for every job)."""
        if n < 1:
            raise ValueError("set_actors needs n >= 1")
        self._ray.get(self._group.set_preparers.remote(n))

    @property
    def num_actors(self):
        return self.group_stats()["preparers"]

    def actors(self):
        return []

    def group_stats(self):
        """The group's counters: prepared (batches handed to preparers),
        reprepared, prepared_per_epoch, wants (the jobs' asks for batch
        objects, about 2 x batches / window per job), jobs, positions,
        events."""
        return self._ray.get(self._group.stats.remote())

    def group_pids(self):
        return self._ray.get(self._group.pids.remote())

    def skipped(self):
        """The group's preparers' skipped messages, as DataLoader.skipped()
        (the same for every job of the group)."""
        return _merge_skipped(self._ray, self._ray.get(self._group.skipped.remote()))

    def cache_stats(self):
        """The group's preparers' caches (cache_bytes=), as
        DataLoader.cache_stats()."""
        from .ray_cache import merge_stats
        got = []
        for r in self._ray.get(self._group.cache_stats.remote()):
            try:
                got.append(self._ray.get(r, timeout=60))
            except Exception:  # a preparer gone meanwhile
                pass
        return merge_stats(got)

    def stats(self):
        return {"batches": self._taken, "samples": self._samples,
                "wait_s": self._wait_s, "job": self._job,
                "group": None if self._left else self.group_stats()}

    def close(self):
        """Leaves the group (the last job to leave ends it)."""
        if self._left:
            return
        self._stop_telemetry()
        self._left = True
        self._finalizer.detach()
        self._beat.set()
        try:
            self._ray.get(self._group.leave.remote(self._job))
        except Exception:  # the group is gone already
            pass
