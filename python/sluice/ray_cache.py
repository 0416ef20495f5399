"""A partitioned sample cache across Ray actors:
sluice.ray.DataLoader(..., partition=True, cache_bytes=N).

Each preparer actor owns one part of the dataset, the samples whose index
i has i % parts == its part (parts: the actors started with the loader),
and its sample cache (cache_bytes, MinIO: docs/DESIGN.md, "Sample cache")
holds only samples of its part. The cluster together caches parts x
cache_bytes, more than one actor (one node) can.

Before a preparer runs a chunk of batches (sluice.Loader.start_plan) it
asks, for every sample of those batches, the sample's owner for the
encoded bytes (`serve`, a Ray actor call; the owner answers from its cache
or reads storage and fills its cache: one read per sample and epoch in the
whole cluster while the parts fit), its own part through its own cache the
same way, and lends the bytes to its loader (sluice.Loader.cache_lend): the
loader reads nothing from storage. Every byte is the sample's, so the
stream is the local loader's, digest for digest.

A part whose owner is gone (killed, its node lost, retired) is read from
storage by the preparer that needs it (counted as fallback reads) until a
new actor takes the part over: the replacement sluice.ray starts for a
dead actor gets the dead one's part, with an empty cache, filled again as
it serves. Nothing is lost: a sample whose owner fails is read from
storage.

Counters (stats()["cache"] of the loader; per epoch under "by_epoch",
keyed by the epoch of the batch that needed the sample): storage_reads
(samples read from storage: misses of the owners' caches plus fallback
reads), local_hits / local_misses (samples of the preparer's own part),
remote_hits / remote_misses (samples of another actor's part, by whether
the owner had them cached), fallback_reads, remote_bytes (encoded bytes
that came from other actors), storage_bytes, and per actor its cache's
entries and bytes.

Actors call each other: `serve` runs in its own concurrency group (threads
beside `prepare`), so two preparers waiting for each other's samples do
not deadlock.
"""
import itertools
import os
import threading
from concurrent.futures import ThreadPoolExecutor

from .ray import _Preparer

__all__ = ["owner_of", "part_preparer_class"]

_COUNTERS = ("storage_reads", "storage_bytes", "local_hits", "local_misses",
             "remote_hits", "remote_misses", "remote_bytes", "fallback_reads",
             "samples")


def owner_of(sample, parts):
    """The part that caches `sample` (a stable rule: its index mod
    parts; the epoch's permutation spreads every batch over the parts)."""
    return sample % parts


class _PartPreparer(_Preparer):
    """A preparer that owns part `part` of `parts` (every sample with
    solo=True: the comparison without partitioning, each actor caching
    what it reads). Two sluice.Loaders: the store, never started, whose
    cache holds the part (read_sample: hits, or reads filling it), and the
    preparing one, whose cache only takes lent bytes (a Loader replaces
    its engine, cache included, when a plan starts while batches are
    still held: the store's cache outlives that)."""

    def __init__(self, source, batch_size, image_size, options, part, parts,
                 storage=None, solo=False):
        import sluice
        if not options.get("cache_bytes"):
            raise ValueError("partition=True needs cache_bytes > 0 (each "
                             "actor's part of the cache)")
        if options.get("cache_decoded"):
            raise ValueError("partition=True caches encoded samples: "
                             "cache_decoded is not supported")
        store = {k: options[k] for k in ("cache_bytes", "cache_policy",
                                         "cache_codec") if k in options}
        self._store = sluice.Loader(source, batch_size, image_size, epochs=1,
                                    threads=1, **store)
        if storage:
            self._store._testing_storage(*storage)
        # The preparing loader reads nothing: a cache of one byte takes
        # lent samples only.
        super().__init__(source, batch_size, image_size,
                         dict(options, cache_bytes=1), None)
        self.part, self.parts, self.solo = part, parts, solo
        self._pool = ThreadPoolExecutor(max(1, int(options.get("read_threads") or 4)))
        self._mu = threading.RLock()  # the counters (serve reads them)
        self._reading = {}  # sample -> Event: its read from storage under way
        self._by_epoch = {}
        self._served = {"served": 0, "served_hits": 0, "served_bytes": 0}

    def set_part(self, part):
        self.part = part

    # -------------------------------------------------------- the owner

    def _read(self, i):
        """(bytes, hit) from this actor's cache, reading storage and
        filling the cache on a miss. One read of a sample at a time: a
        second asker (another actor's serve beside this one's own batch,
        at an epoch's turn) waits for the first and then finds it cached,
        rather than reading it from storage again."""
        with self._mu:
            first = self._reading.get(i)
            if first is None:
                self._reading[i] = threading.Event()
        if first is not None:
            first.wait()
            return self._store.read_sample(i, True)  # a hit if it was kept
        try:
            return self._store.read_sample(i, True)
        finally:
            with self._mu:
                self._reading.pop(i).set()

    def serve(self, samples):
        """The owner's side: each sample's (bytes, hit)."""
        out = list(self._pool.map(self._read, samples))
        with self._mu:
            s = self._served
            s["served"] += len(out)
            s["served_hits"] += sum(1 for _, h in out if h)
            s["served_bytes"] += sum(len(b) for b, _ in out)
        return out

    # -------------------------------------------------------- the preparer

    def _count(self, epoch, key, n=1):
        with self._mu:
            c = self._by_epoch.setdefault(epoch, dict.fromkeys(_COUNTERS, 0))
            c[key] += n

    def _stored(self, epoch, i, data):
        """Sample i of epoch's batches was read from storage."""
        with self._mu:
            self._count(epoch, "storage_reads")
            self._count(epoch, "storage_bytes", len(data))
            by = self._by_epoch[epoch].setdefault("storage_reads_by_part", {})
            p = owner_of(i, self.parts)
            by[p] = by.get(p, 0) + 1

    def prepare(self, batches, owners=None):
        """Gets every sample of the planned batches from its part's owner
        (this actor for its own part), lends the bytes to the loader, then
        prepares the batches as sluice.ray's preparer does; one epoch's
        batches at a time (a sample is lent once, and is in an epoch
        once)."""
        out = []
        for _, group in itertools.groupby(batches, key=lambda b: b[0]):
            group = list(group)
            self._lend(group, owners)
            try:
                got = self._prepare(group)
            finally:
                self._loader.cache_lend_clear()
            out.extend(got)
        return out

    def _lend(self, batches, owners):
        import ray
        L = self._loader
        need = {}  # sample -> its batch's epoch
        for e, b in batches:
            for i in L.batch_samples(e, b):
                need[i] = e
        mine, theirs = [], {}
        for i in need:
            p = owner_of(i, self.parts)
            if p == self.part or self.solo:
                mine.append(i)
            else:
                theirs.setdefault(p, []).append(i)
        # Ask every owner at once, read our own part meanwhile.
        asked = {}
        fallback = []
        for p, ids in theirs.items():
            h = owners[p] if owners and p < len(owners) else None
            if h is None:
                fallback.extend(ids)
            else:
                asked[p] = (ids, h.serve.remote(ids))
        own = list(self._pool.map(self._read, mine))
        lend = []
        for i, (data, hit) in zip(mine, own):
            e = need[i]
            self._count(e, "local_hits" if hit else "local_misses")
            if not hit:
                self._stored(e, i, data)
            lend.append((i, data))
        for p, (ids, ref) in asked.items():
            try:
                got = ray.get(ref)
            except _lost_errors(ray):  # the owner is gone: storage
                fallback.extend(ids)
                continue
            for i, (data, hit) in zip(ids, got):
                e = need[i]
                self._count(e, "remote_hits" if hit else "remote_misses")
                self._count(e, "remote_bytes", len(data))
                if not hit:
                    self._stored(e, i, data)
                lend.append((i, data))
        if fallback:
            reads = self._pool.map(lambda i: self._store.read_sample(i, False)[0],
                                   fallback)
            for i, data in zip(fallback, reads):
                e = need[i]
                self._count(e, "fallback_reads")
                self._stored(e, i, data)
                lend.append((i, data))
        for i, data in lend:
            self._count(need[i], "samples")
            L.cache_lend(i, data)

    def cache_stats(self):
        """This actor's counters and its cache's size now."""
        c = self._store.stats().get("cache") or {}
        with self._mu:
            served = dict(self._served)
            by_epoch = {e: {k: dict(x) if isinstance(x, dict) else x
                            for k, x in v.items()}
                        for e, v in self._by_epoch.items()}
        return {"part": self.part, "entries": c.get("entries", 0),
                "bytes": c.get("bytes", 0), "by_epoch": by_epoch,
                "engine": c, **served}


def _lost_errors(ray):
    x = ray.exceptions
    return (x.RayActorError, x.ObjectLostError, x.WorkerCrashedError)


def part_preparer_class(ray, serve_threads=2):
    """The Ray actor class: `serve` and `cache_stats` in their own
    concurrency group, beside `prepare`."""
    cls = type("PartPreparer", (_PartPreparer,), {
        "serve": ray.method(concurrency_group="serve")(_PartPreparer.serve),
        "cache_stats": ray.method(concurrency_group="serve")(
            _PartPreparer.cache_stats),
        "pid": ray.method(concurrency_group="serve")(lambda self: os.getpid()),
    })
    return ray.remote(concurrency_groups={"serve": serve_threads})(cls)


def merge_stats(per_actor):
    """The loader's view: totals, per epoch, per actor."""
    total = dict.fromkeys(_COUNTERS, 0)
    by_epoch = {}
    for s in per_actor:
        for e, c in s["by_epoch"].items():
            d = by_epoch.setdefault(e, dict.fromkeys(_COUNTERS, 0))
            for k, v in c.items():
                if isinstance(v, dict):  # storage_reads_by_part
                    m = d.setdefault(k, {})
                    for p, n in v.items():
                        m[p] = m.get(p, 0) + n
                    continue
                d[k] += v
                total[k] += v
    total["by_epoch"] = dict(sorted(by_epoch.items()))
    total["entries"] = sum(s["entries"] for s in per_actor)
    total["bytes"] = sum(s["bytes"] for s in per_actor)
    total["per_actor"] = per_actor
    return total
