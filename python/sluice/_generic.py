"""Generic mode of ``sluice.torch.DataLoader``: any map-style Dataset, run in
worker processes, batches delivered in sampler order.

Pure Python (no compiled extension needed); torch is required.

Order and equality with ``torch.utils.data.DataLoader``
-------------------------------------------------------
The index stream is built in the main process exactly as torch builds it,
including the order of random draws: per iteration torch first draws
``base_seed`` from ``generator`` (or the global RNG), then ``RandomSampler``
draws its permutation (``randperm(n, generator)``, or, with no generator, a
seed from the global RNG).  So for the same global RNG state / generator the
batches hold the same indices in the same order, and for a deterministic
``dataset[i]`` the batches are equal to torch's, byte for byte.

* ``generator=g``: as torch with ``generator=g`` (the generator advances the
  same way, epoch after epoch; with ``persistent_workers`` torch draws
  ``base_seed`` only once, and so do we).
* ``seed=s``: epoch ``e`` uses ``torch.Generator().manual_seed(s + e)``; its
  batches equal one pass of torch's ``DataLoader(...,
  generator=torch.Generator().manual_seed(s + e))``.  The epoch advances by
  one at each ``__iter__`` unless ``set_epoch`` sets it, so the stream is a
  function of ``(seed, epoch, batch)``.
* neither: the global torch RNG, as torch.

Exact fast path
---------------
For a torchvision ``ImageFolder`` / ``DatasetFolder`` (with the PIL loader)
whose transform starts with ``RandomResizedCrop`` or ``Resize`` (v1 or v2),
``dataset[i]`` is computed by ``sluice._fastpath``: the transform's own
``get_params`` draws the crop, sluice decodes only that box of the JPEG and
resamples it with PIL's bilinear weights, and the rest of the transform runs
as written -- the same pixels and RNG draws as PIL's path, 1.7-2× faster
per image.  Files it does not handle take the ordinary ``dataset[i]``.
``fast_path=False`` turns it off; ``stats()`` reports whether it applies and
how many samples took it.
It needs the built package (``sluice._sluice``); loaded from its file alone,
this module runs without it.

Random augmentations
--------------------
Work is spread in short runs of consecutive samples of a batch (about
``batch_size / (2 * workers)`` each; whichever worker is free takes the next
run), so the worker that runs a sample is not fixed.  To keep random transforms
reproducible anyway, each worker re-seeds ``torch``, ``random`` and (if
imported) ``numpy`` before every ``dataset[i]`` with a seed derived from
``(base_seed, position of the sample in the epoch)``.  Augmented outputs are
therefore a function of the seed and epoch, independent of the number of
workers, of ``set_workers`` changes and of resumes -- but they are *not*
equal to torch's, whose augmentations depend on ``num_workers`` (torch seeds
worker ``w`` once with ``base_seed + w`` and hands whole batches round-robin).
Same samples, same order, same labels; different crops.  ``num_workers=0``
loads in the calling process without re-seeding, exactly as torch does.

Transport
---------
With the default collate and samples that are (nests of tuple/list/dict of)
fixed-shape CPU tensors, numpy arrays, ints and floats, workers write each
sample straight into a shared-memory batch slot (a ring of
``2 * prefetch_factor * workers`` slots, layout learnt from the first sample)
and send only "task t done" (a few bytes per run of samples).  The main
process neither unpickles nor stacks nor copies: the batch's tensors view the
slot itself (as torch's batches view the shared memory its workers collate
into), and the slot is reused only once every tensor made from that batch has
been freed.  The batch is the caller's to keep; if the caller keeps more than
``prefetch_factor * workers`` batches alive, further batches are copied out
of the ring instead, so the ring stays bounded.  Anything else (custom ``collate_fn``,
strings, ragged shapes) travels pickled and is collated by ``collate_fn`` in
the main process, as torch does.

A worker that dies (a signal, out of memory, ``os._exit``) stops the
iteration with a RuntimeError naming the worker, its pid, the signal or exit
code and the ``dataset[i]`` it was loading (each worker keeps that index in a
shared word).  Slot pages are reserved when a slot is made, so a full
``/dev/shm`` is found there, not as a SIGBUS later in a worker (what a
small /dev/shm did before: the worker died writing a batch); the ring then
keeps half of the slots that fit, with a RuntimeWarning, and the other
batches travel pickled.  The slots are unlinked by ``close()``, when the
loader is collected, or at interpreter exit.
"""

import collections
import errno
import math
import mmap
import os
import pickle
import random
import signal
import sys
import threading
import time
import warnings
import weakref
from multiprocessing import connection as mp_connection
from multiprocessing import shared_memory

import torch
import torch.multiprocessing as tmp
from torch.utils.data import _utils as _tutils
from torch.utils.data._utils.collate import default_collate, default_convert

try:  # the exact crop-decode fast path needs the package (and its extension)
    from . import _fastpath
except ImportError:
    _fastpath = None

__all__ = ["GenericLoader"]

_POLL_S = 0.1  # how often blocked parties re-check shutdown/retire/health
_MASK64 = (1 << 64) - 1


def _mix64(x):
    """splitmix64 finaliser: distinct, well-spread per-sample seeds."""
    x = (x + 0x9E3779B97F4A7C15) & _MASK64
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & _MASK64
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & _MASK64
    return x ^ (x >> 31)


def _draw_int64(generator):
    # What torch does for base_seed and for RandomSampler's seed.
    return int(torch.empty((), dtype=torch.int64).random_(generator=generator).item())


def _random_sampler_order(n, g):
    """RandomSampler(generator=g).__iter__ for num_samples == n, draw for draw:
    once exhausted it computes (and drops) one more permutation, which
    advances g; later epochs depend on it."""
    yield from torch.randperm(n, generator=g).tolist()
    yield from torch.randperm(n, generator=g).tolist()[:0]


# --------------------------------------------------------------------------
# Sample layout: a tree of containers over fixed-shape leaves.
#   ('t', dtype, shape) tensor   ('a', dtype, shape) numpy array
#   ('i',) python int -> int64   ('f',) python float -> float64
#   ('T', children) tuple  ('L', children) list  ('D', keys, children) dict
# default_collate turns tuples and lists into lists, dicts into dicts.

def _spec_of(x):
    t = type(x)
    if t is torch.Tensor:
        if (x.device.type != "cpu" or x.layout != torch.strided or x.is_quantized
                or x.requires_grad):
            return None
        return ("t", x.dtype, tuple(x.shape))
    if t is int:
        return ("i",) if -(1 << 63) <= x < (1 << 63) else None
    if t is float:
        return ("f",)
    if t is tuple or t is list:
        ch = [_spec_of(c) for c in x]
        if not ch or any(c is None for c in ch):
            return None
        return ("T" if t is tuple else "L", tuple(ch))
    if t is dict:
        keys = tuple(x.keys())
        ch = [_spec_of(x[k]) for k in keys]
        if not ch or any(c is None for c in ch):
            return None
        return ("D", keys, tuple(ch))
    np = sys.modules.get("numpy")
    if np is not None and t is np.ndarray:
        if x.dtype.hasobject or x.dtype.kind in "USV":
            return None
        try:
            dt = torch.from_numpy(x[:0] if x.ndim else x.reshape(1)[:0]).dtype
        except TypeError:
            return None
        return ("a", dt, tuple(x.shape))
    return None


def _leaf_specs(spec, out):
    k = spec[0]
    if k in "TL":
        for c in spec[1]:
            _leaf_specs(c, out)
    elif k == "D":
        for c in spec[2]:
            _leaf_specs(c, out)
    else:
        out.append(spec)
    return out


def _flatten_match(x, spec, out):
    """Append x's leaves to out; False if x does not have this exact layout."""
    k = spec[0]
    t = type(x)
    if k == "t":
        return (t is torch.Tensor and x.dtype == spec[1] and tuple(x.shape) == spec[2]
                and x.device.type == "cpu" and x.layout == torch.strided
                and not x.requires_grad and not x.is_quantized and out.append(x) is None)
    if k == "a":
        np = sys.modules.get("numpy")
        if np is None or t is not np.ndarray or tuple(x.shape) != spec[2]:
            return False
        try:
            tx = torch.from_numpy(x)
        except TypeError:
            return False
        if tx.dtype != spec[1]:
            return False
        out.append(tx)
        return True
    if k == "i":
        if t is not int or not -(1 << 63) <= x < (1 << 63):
            return False
        out.append(x)
        return True
    if k == "f":
        if t is not float:
            return False
        out.append(x)
        return True
    if k in "TL":
        if t is not (tuple if k == "T" else list) or len(x) != len(spec[1]):
            return False
        return all(_flatten_match(c, s, out) for c, s in zip(x, spec[1]))
    if k == "D":
        if t is not dict or tuple(x.keys()) != spec[1]:
            return False
        return all(_flatten_match(x[key], s, out) for key, s in zip(spec[1], spec[2]))
    return False


def _leaf_buffer(spec):
    """(dtype, per-sample shape) of the slot buffer holding this leaf."""
    k = spec[0]
    if k in "ta":
        return spec[1], spec[2]
    return (torch.int64 if k == "i" else torch.float64), ()


def _unflatten(spec, leaves, batched):
    """Rebuild one structure.  batched: collated (lists for tuples); else the
    original sample types (ints, floats, numpy arrays)."""
    it = iter(leaves)

    def build(s):
        k = s[0]
        if k in "TL":
            items = [build(c) for c in s[1]]
            return tuple(items) if (k == "T" and not batched) else items
        if k == "D":
            return {key: build(c) for key, c in zip(s[1], s[2])}
        v = next(it)
        if batched:
            return v
        if k == "i":
            return int(v.item())
        if k == "f":
            return float(v.item())
        if k == "a":
            return v.clone().numpy()
        return v.clone()

    try:
        return build(spec)
    finally:
        # build is a recursive closure (a reference cycle holding `it`, and so
        # the leaves): break it, or lent batch slots wait for the cyclic GC.
        build = it = None


class _Layout:
    """Slot layout shared with workers: leaf offsets within one slot segment."""

    def __init__(self, version, spec, cap, names):
        self.version = version
        self.spec = spec
        self.cap = cap
        self.names = list(names)
        self.leaves = []  # (offset, dtype, shape)
        off = 0
        for ls in _leaf_specs(spec, []):
            dt, shape = _leaf_buffer(ls)
            esz = torch.empty((), dtype=dt).element_size()
            off = (off + 63) // 64 * 64
            self.leaves.append((off, dt, shape))
            off += esz * cap * math.prod(shape)
        self.slot_bytes = max(64, off)

    def views(self, buf):
        out = []
        for off, dt, shape in self.leaves:
            cnt = self.cap * math.prod(shape)
            out.append(torch.frombuffer(buf, dtype=dt, count=cnt, offset=off)
                       .view((self.cap,) + shape))
        return out

    def __getstate__(self):
        return (self.version, self.spec, self.cap, self.names)

    def __setstate__(self, st):
        self.__init__(*st)


def _map_segment(name, size):
    fd = os.open("/dev/shm/" + name, os.O_RDWR)
    try:
        return mmap.mmap(fd, size)
    finally:
        os.close(fd)


def _reserve(name, size):
    """Allocates the segment's pages now: a full /dev/shm is then this
    error here, not a SIGBUS later in whichever process first touches a page
    (a worker writing a sample, or the main process reading a batch)."""
    fd = os.open("/dev/shm/" + name, os.O_RDWR)
    try:
        os.posix_fallocate(fd, 0, size)
    except OSError as e:
        try:
            st = os.statvfs("/dev/shm")
            free = f"{st.f_bavail * st.f_frsize / 2**20:.0f} MiB free"
        except OSError:
            free = "free space unknown"
        raise OSError(e.errno, f"sluice GenericLoader: cannot reserve a {size / 2**20:.1f} MiB "
                      f"batch slot in /dev/shm ({free}): {e.strerror}") from None
    finally:
        os.close(fd)


# --------------------------------------------------------------------------
# Worker process.

def _send(wlock, conn, msg):
    data = pickle.dumps(msg, protocol=pickle.HIGHEST_PROTOCOL)
    with wlock:
        conn.send_bytes(data)


def _load(dataset, fast, index, counts):
    """dataset[index], through the fast path when it takes the sample;
    counts[0] += 1 when it did, counts[1] += 1 when it declined."""
    if fast is not None:
        sample = fast(index)
        if sample is not None:
            counts[0] += 1
            return sample
        counts[1] += 1
    return dataset[index]


def _worker_main(wid, nworkers, dataset, task_r, task_lock, res_w, res_lock, ctl_r,
                 retire, shutdown, layout, base_seed, init_fn, fast_path, cur):
    # Ctrl-C goes to the whole process group; the main process decides.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    ppid = os.getppid()
    torch.set_num_threads(1)
    seed = (base_seed + wid) & _MASK64
    random.seed(seed)
    # The CPU generator only: torch.manual_seed also queues a CUDA seeding
    # that records a traceback, which crashed or hung forked workers of a
    # process running other threads (Ray's, TensorFlow's).
    torch.random.default_generator.manual_seed(seed)
    np = sys.modules.get("numpy")
    if np is not None:
        np.random.seed(seed & 0xFFFFFFFF)
    _tutils.worker._worker_info = _tutils.worker.WorkerInfo(
        id=wid, num_workers=nworkers, seed=seed, dataset=dataset)
    try:
        if init_fn is not None:
            init_fn(wid)
    except Exception:
        _send(res_lock, res_w, ("e", -1, wid, 0.0,
                                _tutils.ExceptionWrapper(where=f"in sluice worker {wid} (worker_init_fn)")))
        return
    fast = None
    if fast_path and _fastpath is not None:
        try:
            fast = _fastpath.plan(dataset)[0]
        except Exception:  # never worse than the ordinary path
            fast = None
    mapped = {}  # segment name -> (mmap, leaf views)
    gen = torch.random.default_generator
    while True:
        if shutdown.is_set() or os.getppid() != ppid:
            return
        # The count is read without the lock (a hint), and the lock is
        # taken only to claim a retirement: a worker killed between samples
        # (SIGKILL, OOM) must not die holding it, or every other process
        # waits on it forever (it did, once every few hundred kills).
        if retire.get_obj().value > 0 and retire.get_lock().acquire(timeout=_POLL_S):
            try:
                claimed = retire.get_obj().value > 0
                if claimed:
                    retire.get_obj().value -= 1
            finally:
                retire.get_lock().release()
            if claimed:
                _send(res_lock, res_w, ("x", -1, wid, 0.0, None))
                return
        if not task_lock.acquire(timeout=_POLL_S):
            continue
        try:
            data = task_r.recv_bytes() if task_r.poll(_POLL_S) else None
        finally:
            task_lock.release()
        if data is None:
            continue
        # A task is a run of consecutive samples of one batch: rows
        # row0.. of slot, epoch positions pos0.. (cuts messages per sample).
        tid, indices, slot, row0, lver, base, pos0 = pickle.loads(data)
        t0 = time.perf_counter()
        views = None
        if slot >= 0:
            while layout is None or layout.version < lver:
                layout = _Layout(*ctl_r.recv())
                for n in list(mapped):
                    if n not in layout.names:
                        del mapped[n]
            name = layout.names[slot]
            if name not in mapped:
                mm = _map_segment(name, layout.slot_bytes)
                mapped[name] = (mm, layout.views(mm))
            views = mapped[name][1]
        ok = True
        counts = [0, 0]  # fast path: taken, declined
        for k, index in enumerate(indices):
            # What this worker is on, for the message if it dies (shared).
            cur[0] = index if type(index) is int and 0 <= index < (1 << 62) else -2
            try:
                sseed = _mix64(base ^ _mix64(pos0 + k))
                gen.manual_seed(sseed)
                random.seed(sseed)
                np = sys.modules.get("numpy")
                if np is not None:
                    np.random.seed(sseed & 0xFFFFFFFF)
                sample = _load(dataset, fast, index, counts)
            except Exception:
                w = _tutils.ExceptionWrapper(
                    where=f"in sluice GenericLoader worker {wid} while loading dataset[{index!r}]")
                _send(res_lock, res_w, ("e", tid, wid, time.perf_counter() - t0, w))
                ok = False
                break
            if views is not None:
                leaves = []
                if _flatten_match(sample, layout.spec, leaves):
                    row = row0 + k
                    try:
                        for v, x in zip(views, leaves):
                            if isinstance(x, torch.Tensor):
                                v[row].copy_(x)
                            else:
                                v[row] = x
                        continue
                    except Exception:
                        pass  # fall through to the pickled path
            try:
                _send(res_lock, res_w, ("o", tid, wid, 0.0, (k, sample)))
            except Exception:
                w = _tutils.ExceptionWrapper(
                    where=f"in sluice GenericLoader worker {wid} sending dataset[{index!r}]")
                _send(res_lock, res_w, ("e", tid, wid, time.perf_counter() - t0, w))
                ok = False
                break
        cur[0] = -1  # idle
        if ok:
            _send(res_lock, res_w, ("k", tid, wid, time.perf_counter() - t0, counts))


# --------------------------------------------------------------------------
# Worker pool: processes that can be added/retired between samples.

def _mp_context(ctx):
    """The workers' multiprocessing context: torch's argument (None: fork,
    the default on Linux; a start method's name; or a context). spawn and
    forkserver pickle the dataset, worker_init_fn and collate_fn's inputs
    as torch's workers do."""
    if ctx is None:
        return tmp.get_context("fork")
    if isinstance(ctx, str):
        if ctx not in tmp.get_all_start_methods():
            raise ValueError("multiprocessing_context option should specify a "
                             "valid start method in "
                             f"{tmp.get_all_start_methods()!r}, but got "
                             f"multiprocessing_context={ctx!r}")
        return tmp.get_context(ctx)
    if not hasattr(ctx, "Process") or not hasattr(ctx, "get_start_method"):
        raise TypeError("multiprocessing_context option should be a valid "
                        "context object or a string specifying the start "
                        f"method, but got multiprocessing_context={ctx!r}")
    return ctx


class _Pool:
    def __init__(self, dataset, base_seed, init_fn, fast_path, ctx):
        self.ctx = ctx
        self.dataset = dataset
        self.fast_path = fast_path
        self.base_seed = base_seed
        self.init_fn = init_fn
        self.task_r, self.task_w = self.ctx.Pipe(duplex=False)
        self.res_r, self.res_w = self.ctx.Pipe(duplex=False)
        self.task_lock = self.ctx.Lock()
        self.res_lock = self.ctx.Lock()
        self.retire = self.ctx.Value("i", 0)
        self.shutdown_ev = self.ctx.Event()
        self.workers = {}  # wid -> (Process, ctl_w)
        self.retiring = 0  # retire requests not yet acknowledged
        self.layout = None
        self.target = 0
        self.busy = collections.defaultdict(float)
        self.cur = {}  # wid -> shared [dataset index being loaded, -1 idle]

    def live(self):
        return len(self.workers) - self.retiring

    def resize(self, n):
        self.target = n
        while self.live() < n:
            self._spawn()
        extra = self.live() - n
        if extra > 0:
            # Bounded: a worker killed in the instant it held the lock
            # (claiming a retirement) is an error, not a hang.
            if not self.retire.get_lock().acquire(timeout=10):
                raise RuntimeError("sluice GenericLoader: a worker died holding the pool's "
                                   "retire lock; the loader cannot go on")
            try:
                self.retire.get_obj().value += extra
            finally:
                self.retire.get_lock().release()
            self.retiring += extra

    def _spawn(self):
        wid = next(i for i in range(len(self.workers) + 1) if i not in self.workers)
        ctl_r, ctl_w = self.ctx.Pipe(duplex=False)
        cur = self.ctx.RawArray("q", [-1])  # the dataset index it is loading
        p = self.ctx.Process(
            target=_worker_main, daemon=True, name=f"sluice-worker-{wid}",
            args=(wid, max(1, self.target), self.dataset, self.task_r, self.task_lock,
                  self.res_w, self.res_lock, ctl_r, self.retire, self.shutdown_ev,
                  self.layout, self.base_seed, self.init_fn, self.fast_path, cur))
        p.start()
        ctl_r.close()
        self.workers[wid] = (p, ctl_w)
        self.cur[wid] = cur

    def set_layout(self, layout):
        self.layout = layout
        for p, ctl in self.workers.values():
            try:
                ctl.send(layout.__getstate__())  # plain tuple: no class lookup
            except OSError:
                pass  # a dead worker is reported through its sentinel

    def put(self, msg):
        self.task_w.send_bytes(pickle.dumps(msg, protocol=pickle.HIGHEST_PROTOCOL))

    def worker_exited(self, wid):
        p, ctl = self.workers.pop(wid)
        self.cur.pop(wid, None)
        self.retiring -= 1
        p.join(5)
        ctl.close()

    def check_dead(self):
        """Raise if a worker died without being told to, naming the worker
        and the sample it was loading."""
        for wid, (p, _) in list(self.workers.items()):
            if p.exitcode is not None:
                code = p.exitcode
                try:
                    how = (f"was killed by signal {signal.Signals(-code).name}" if code < 0
                           else f"exited with code {code}")
                except ValueError:
                    how = f"was killed by signal {-code}"
                idx = self.cur[wid][0] if wid in self.cur else -1
                what = (f"while loading dataset[{idx}]" if idx >= 0
                        else "while loading a sample" if idx == -2
                        else "between samples")
                raise RuntimeError(
                    f"sluice GenericLoader worker {wid} (pid {p.pid}) {how} unexpectedly "
                    f"{what}; batches in flight are lost (out of memory? a crash in a "
                    "native library?)")

    def close(self):
        if self.shutdown_ev.is_set():
            return
        self.shutdown_ev.set()
        deadline = time.monotonic() + 2 * _POLL_S + 1.0
        for p, _ in self.workers.values():
            p.join(max(0.0, deadline - time.monotonic()))
        for p, ctl in self.workers.values():
            if p.exitcode is None:
                p.terminate()
                p.join(1.0)
            if p.exitcode is None:
                p.kill()
                p.join()
            ctl.close()
        self.workers.clear()
        for c in (self.task_r, self.task_w, self.res_r, self.res_w):
            c.close()


# --------------------------------------------------------------------------
# Shared-memory batch slots (owned by the loader, reused across epochs).

class _Slots:
    def __init__(self):
        self.layout = None
        self.shms = []   # SharedMemory objects (for unlink)
        self.maps = []   # our own mmaps of them
        self.views = []  # per slot: leaf views
        self.free = []
        self.version = 0
        self.held = set()  # slots lent out as batch tensors (free when collected)
        self.gen = 0       # bumped when the slots are dropped: stale returns ignored
        self.limit = None  # most slots /dev/shm holds (set when it ran out)

    def lend(self, slot, n):
        """Leaf tensors over rows [0, n) of slot, backed by the slot itself (no
        copy).  The slot comes back to ``free`` once every tensor (and view)
        made from them is collected."""
        mv = memoryview(self.maps[slot])
        leaves = []
        for off, dt, shape in self.layout.leaves:
            cnt = n * math.prod(shape)
            if cnt == 0:
                leaves.append(torch.empty((n,) + shape, dtype=dt))
                continue
            leaves.append(torch.frombuffer(mv, dtype=dt, count=cnt, offset=off)
                          .view((n,) + shape))
        self.held.add(slot)
        # torch.frombuffer keeps mv alive for as long as any storage made from
        # it lives; mv itself is referenced by nothing else.
        f = weakref.finalize(mv, _Slots._returned, self, slot, self.gen)
        f.atexit = False
        return leaves

    def _returned(self, slot, gen):
        if gen == self.gen and slot in self.held:
            self.held.discard(slot)
            self.free.append(slot)

    def create(self, spec, cap, count):
        self.release_all()
        self.limit = None  # a new slot size: what fits is found again
        self.version += 1
        self._grow(spec, cap, count)

    def ensure(self, count):
        if self.limit is not None:
            count = min(count, self.limit)
        if self.layout is not None and len(self.shms) < count:
            self.version += 1
            self._grow(self.layout.spec, self.layout.cap, count)
            return True
        return False

    def _grow(self, spec, cap, count):
        probe = _Layout(self.version, spec, cap, [])
        start = len(self.shms)  # slots that may be in use: kept
        while len(self.shms) < count:
            shm = shared_memory.SharedMemory(create=True, size=probe.slot_bytes)
            try:
                _reserve(shm.name, probe.slot_bytes)
            except OSError as e:
                shm.close()
                shm.unlink()
                if e.errno != errno.ENOSPC:
                    raise
                self._shrink_to_fit(start, count, e)
                break
            mm = _map_segment(shm.name, probe.slot_bytes)
            shm.close()  # keep only our mapping; the object stays for unlink()
            self.shms.append(shm)
            self.maps.append(mm)
            self.views.append(probe.views(mm))
            self.free.append(len(self.shms) - 1)
        self.layout = _Layout(self.version, spec, cap, [s.name for s in self.shms])

    def _shrink_to_fit(self, start, wanted, e):
        """/dev/shm is full: keep half of the slots that fit (the other half's
        space is left to what else needs /dev/shm, the pickled batches
        included: torch sends a tensor through shared memory), and go on.
        Batches beyond the ring travel pickled, as every batch does with a
        custom collate_fn: slower, never wrong."""
        keep = max(start, len(self.shms) // 2)
        while len(self.shms) > keep:
            self.views.pop()
            mm = self.maps.pop()
            try:
                mm.close()
            except BufferError:
                pass  # unmapped when its last view is collected
            self.shms.pop().unlink()
            self.free.remove(len(self.shms))
        self.limit = keep
        warnings.warn(f"{e.strerror} (wanted {wanted} batch slots); using {keep}, the rest "
                      "of the batches travel pickled (slower). Fewer workers, a smaller batch or "
                      "prefetch_factor, or a larger /dev/shm (docker: --shm-size) "
                      "restore the zero-copy path.", RuntimeWarning, stacklevel=2)

    def release_all(self):
        self.gen += 1
        self.held = set()
        self.views = []
        self.free = []
        for mm in self.maps:
            try:
                mm.close()
            except BufferError:
                pass  # still viewed somewhere; unmapped when collected
        for shm in self.shms:
            try:
                shm.unlink()
            except FileNotFoundError:
                pass
        self.shms = []
        self.maps = []
        self.layout = None


def _cleanup(state):
    pool, slots = state.get("pool"), state.get("slots")
    state["pool"] = None
    if pool is not None:
        pool.close()
    if slots is not None:
        slots.release_all()


class _Batch:
    __slots__ = ("indices", "first_pos", "slot", "done", "objs", "error", "t0")

    def __init__(self, indices, first_pos, slot):
        self.indices = indices
        self.first_pos = first_pos
        self.slot = slot
        self.done = 0
        self.objs = {}
        self.error = None


# --------------------------------------------------------------------------

class GenericLoader:
    """Batches of ``collate_fn([dataset[i] for i in batch])`` in sampler order,
    ``dataset[i]`` run in ``num_workers`` processes (see module docstring)."""

    def __init__(self, dataset, batch_size=1, shuffle=False, sampler=None, batch_sampler=None,
                 num_workers=0, collate_fn=None, drop_last=False, seed=None, generator=None,
                 prefetch_factor=2, persistent_workers=False, timeout=0, worker_init_fn=None,
                 pin_memory=False, fast_path=True, multiprocessing_context=None):
        if batch_sampler is not None and (batch_size != 1 or shuffle or sampler is not None
                                          or drop_last):
            raise ValueError("batch_sampler option is mutually exclusive with batch_size, "
                             "shuffle, sampler, and drop_last")
        if sampler is not None and shuffle:
            raise ValueError("sampler option is mutually exclusive with shuffle")
        if num_workers < 0:
            raise ValueError("num_workers option should be non-negative")
        # torch's checks (BatchSampler's, DataLoader's), at construction
        if batch_sampler is None and batch_size is not None and (
                not isinstance(batch_size, int) or isinstance(batch_size, bool)
                or batch_size <= 0):
            raise ValueError("batch_size should be a positive integer value, "
                             f"but got batch_size={batch_size!r}")
        if timeout < 0:
            raise ValueError("timeout option should be non-negative")
        if prefetch_factor is not None and (
                not isinstance(prefetch_factor, int) or prefetch_factor < 1):
            raise ValueError("prefetch_factor should be a positive integer "
                             f"(batches per worker), not {prefetch_factor!r}")
        self._mp_context = _mp_context(multiprocessing_context)
        if seed is not None and generator is not None:
            raise ValueError("give seed or generator, not both")
        self.dataset = dataset
        self.batch_size = None if batch_sampler is not None else batch_size
        self.shuffle = bool(shuffle)
        self.sampler = sampler
        self.batch_sampler = batch_sampler
        self.drop_last = drop_last
        self.num_workers = num_workers
        self._auto_collation = batch_sampler is not None or batch_size is not None
        if collate_fn is None:
            collate_fn = default_collate if self._auto_collation else default_convert
        self.collate_fn = collate_fn
        self._fast_ok = self._auto_collation and collate_fn is default_collate
        self.seed = seed
        self.generator = generator
        self.prefetch_factor = prefetch_factor or 2
        self.persistent_workers = persistent_workers and num_workers > 0
        self.timeout = timeout
        self.worker_init_fn = worker_init_fn
        self.pin_memory = pin_memory and torch.cuda.is_available()
        self.fast_path = bool(fast_path)
        if self.fast_path and _fastpath is not None:
            self.fast_path_plan = _fastpath.plan(dataset)[1]
        else:
            self.fast_path_plan = ("off (fast_path=False)" if not self.fast_path
                                   else "sluice._fastpath is not importable")

        self._target = num_workers
        self._epoch = 0          # epoch the next __iter__ runs
        self._cur = None         # state of the running / last epoch
        self._resume = None
        self._base_seed = None   # persistent workers: drawn once, as torch
        self._gen = 0            # iteration generation (stale iterators stop)
        self._clean = True       # last worker iteration ended with nothing in flight
        self._stats = collections.Counter()
        self._wait_s = 0.0
        self._state = {"pool": None, "slots": _Slots()}
        self._finalizer = weakref.finalize(self, _cleanup, self._state)
        self._lock = threading.Lock()
        self._window = 2
        self._closed = False

    # -- public knobs -------------------------------------------------------

    def __len__(self):
        if self.batch_sampler is not None:
            return len(self.batch_sampler)
        n = len(self.sampler) if self.sampler is not None else len(self.dataset)
        if self.batch_size is None:
            return n
        return n // self.batch_size if self.drop_last else -(-n // self.batch_size)

    def set_epoch(self, epoch):
        """The epoch the next ``__iter__`` runs (it then advances by one).
        Right after load_state_dict, the loaded epoch keeps the loaded
        position (the resume loop's set_epoch at the top of the epoch);
        another epoch drops it and starts that epoch whole."""
        self._epoch = int(epoch)
        if self._resume is not None and int(self._resume["epoch"]) != self._epoch:
            self._resume = None
        for s in (self.sampler, self.batch_sampler):
            if hasattr(s, "set_epoch"):
                s.set_epoch(epoch)

    def set_workers(self, n):
        """Number of worker processes; may be called at any time, from any
        thread.  While an epoch runs on workers it takes effect before the
        next run of samples is handed out (at least 1 worker stays while running)."""
        n = int(n)
        if n < 0:
            raise ValueError("number of workers must be >= 0")
        self._target = n

    def stats(self):
        pool = self._state["pool"]
        return {
            "workers": pool.live() if pool is not None else 0,
            "target_workers": self._target,
            "epoch": self._cur["epoch"] if self._cur else self._epoch,
            "batches": self._stats["batches"],
            "samples": self._stats["samples"],
            "fast_batches": self._stats["fast_batches"],
            "pickled_samples": self._stats["pickled"],
            "fast_path": self.fast_path_plan,
            "fast_path_samples": self._stats["fastpath"],
            "fast_path_fallbacks": self._stats["fastpath_fallbacks"],
            "wait_s": self._wait_s,
            "worker_busy_s": dict(pool.busy) if pool is not None else {},
            "slots": len(self._state["slots"].shms),
            "slot_bytes": (self._state["slots"].layout.slot_bytes
                           if self._state["slots"].layout else 0),
        }

    def state_dict(self):
        cur = self._cur
        if cur is not None and cur["done"] < cur["len"]:
            sd = {k: cur[k] for k in ("epoch", "base_seed", "sampler_seed", "gen_state",
                                      "global_rng", "drew_base")}
            sd["batches_done"] = cur["done"]
        else:
            sd = {"epoch": self._epoch, "batches_done": 0,
                  "gen_state": (self.generator.get_state()
                                if self.generator is not None else None)}
        sd["base_seed_persistent"] = self._base_seed
        return sd

    def load_state_dict(self, sd):
        self._epoch = int(sd["epoch"])
        self._base_seed = sd.get("base_seed_persistent")
        if sd.get("batches_done", 0) > 0:
            self._resume = dict(sd)
        else:
            self._resume = None
            if self.generator is not None and sd.get("gen_state") is not None:
                self.generator.set_state(sd["gen_state"])

    def close(self):
        """Stop workers and free shared memory (also done when collected);
        iterating after it raises ValueError."""
        self._gen += 1
        self._closed = True
        self._finalizer()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # -- epoch plan ----------------------------------------------------------

    def _plan(self):
        """Draw the epoch's randomness exactly as torch's iterator would and
        return (state, iterator over index batches)."""
        r = self._resume
        self._resume = None
        epoch = self._epoch
        self._epoch = epoch + 1
        st = {"epoch": epoch, "done": 0, "sampler_seed": None, "gen_state": None,
              "global_rng": None, "drew_base": True}
        custom = self.sampler is not None or self.batch_sampler is not None
        if self.seed is not None:
            g = torch.Generator()
            g.manual_seed(self.seed + epoch)
        else:
            g = self.generator
        if r is not None:
            if r.get("global_rng") is not None:
                torch.set_rng_state(r["global_rng"])
            if g is not None and r.get("gen_state") is not None:
                g.set_state(r["gen_state"])
            if custom:
                for s in (self.sampler, self.batch_sampler):
                    if hasattr(s, "set_epoch"):
                        s.set_epoch(epoch)
        if g is not None:
            st["gen_state"] = g.get_state()
        if custom:
            st["global_rng"] = torch.get_rng_state()
        if r is not None and g is None and not custom:
            st["drew_base"] = r["drew_base"]
            base = r["base_seed"]
        elif self.persistent_workers and self._base_seed is not None:
            st["drew_base"] = False
            base = self._base_seed
        else:
            base = _draw_int64(g)
        if self.persistent_workers:
            self._base_seed = base
        st["base_seed"] = base

        if self.batch_sampler is not None:
            batches = iter(self.batch_sampler)
        else:
            if self.sampler is not None:
                order = iter(self.sampler)
            elif self.shuffle:
                n = len(self.dataset)
                if g is None:  # RandomSampler without a generator
                    s = r["sampler_seed"] if r is not None else _draw_int64(None)
                    st["sampler_seed"] = s
                    gs = torch.Generator()
                    gs.manual_seed(s)
                    order = iter(torch.randperm(n, generator=gs).tolist())
                else:
                    order = _random_sampler_order(n, g)
            else:
                order = iter(range(len(self.dataset)))
            batches = self._batched(order)
        st["len"] = len(self)
        skip = r["batches_done"] if r is not None else 0
        pos = 0
        for _ in range(skip):
            b = next(batches, None)
            if b is None:
                break
            pos += len(b) if self._auto_collation else 1
        st["done"] = skip
        return st, batches, pos

    def _batched(self, order):
        if self.batch_size is None:
            yield from order
            return
        bs = self.batch_size
        buf = []
        for i in order:
            buf.append(i)
            if len(buf) == bs:
                yield buf
                buf = []
        if buf and not self.drop_last:
            yield buf

    # -- iteration ------------------------------------------------------------

    def __iter__(self):
        if self._closed:
            raise ValueError("operation on a closed sluice GenericLoader "
                             "(close() stopped its workers and freed its "
                             "shared memory)")
        self._gen += 1
        gen = self._gen
        st, batches, pos = self._plan()
        self._cur = st
        if self._target == 0:
            return self._iter_inprocess(st, batches, gen)
        return self._iter_workers(st, batches, pos, gen)

    def _count_fast(self, counts):
        self._stats["fastpath"] += counts[0]
        self._stats["fastpath_fallbacks"] += counts[1]

    def _iter_inprocess(self, st, batches, gen):
        fast = None
        if self.fast_path and _fastpath is not None and self._auto_collation:
            fast = _fastpath.plan(self.dataset)[0]
        for b in batches:
            if gen != self._gen:
                return
            t0 = time.perf_counter()
            if self._auto_collation:
                counts = [0, 0]
                out = self.collate_fn([_load(self.dataset, fast, i, counts) for i in b])
                self._count_fast(counts)
                self._stats["samples"] += len(b)
            else:
                out = self.collate_fn(self.dataset[b])
                self._stats["samples"] += 1
            self._wait_s += time.perf_counter() - t0
            st["done"] += 1
            self._stats["batches"] += 1
            yield self._pin(out)

    def _pin(self, out):
        if self.pin_memory:
            return _tutils.pin_memory.pin_memory(out)
        return out

    def _iter_workers(self, st, batches, pos, gen):
        state = self._state
        slots = state["slots"]
        pool = state["pool"]
        if pool is None or not self.persistent_workers or not self._clean:
            if pool is not None:
                pool.close()
            # No worker writes into a slot any more: all are free.
            slots.free = [i for i in range(len(slots.shms)) if i not in slots.held]
            pool = state["pool"] = _Pool(self.dataset, st["base_seed"], self.worker_init_fn,
                                         self.fast_path, self._mp_context)
            pool.layout = slots.layout
        pool.base_seed = st["base_seed"]
        pool.resize(max(1, self._target))
        inflight = collections.deque()
        tasks = {}  # tid -> (batch, offset in batch, number of samples)
        tid = 0
        exhausted = False
        self._clean = False
        # Decided once the layout is known (persists across epochs).
        fast_decided = not self._fast_ok or slots.layout is not None
        clean = False
        try:
            while True:
                if gen != self._gen:
                    return
                want = max(1, self._target)
                if want != pool.target:
                    pool.resize(want)
                window = max(2, self.prefetch_factor * want)
                self._window = window
                # Twice the window: up to `window` batches lent to the caller
                # (zero-copy) while `window` more are being filled.
                if slots.layout is not None and slots.ensure(2 * window):
                    pool.set_layout(slots.layout)
                # The cap on outstanding tasks keeps the task pipe from filling
                # (a blocked writer here could deadlock with a worker blocked
                # writing a large result).
                # Until the first sample has shown its layout, one batch at a
                # time, so that only that batch travels pickled.
                lim = window if fast_decided else 1
                while not exhausted and len(inflight) < lim and len(tasks) < 512:
                    b = next(batches, None)
                    if b is None:
                        exhausted = True
                        break
                    idxs = b if self._auto_collation else [b]
                    slot = -1
                    if (slots.layout is not None and slots.free
                            and len(idxs) <= slots.layout.cap):
                        slot = slots.free.pop()
                    rec = _Batch(b, pos, slot)
                    lver = slots.layout.version if slot >= 0 else 0
                    csz = max(1, -(-len(idxs) // (2 * want)))
                    for j in range(0, len(idxs), csz):
                        chunk = idxs[j:j + csz]
                        tasks[tid] = (rec, j, len(chunk))
                        pool.put((tid, chunk, slot, j, lver, st["base_seed"], pos + j))
                        tid += 1
                    pos += len(idxs)
                    inflight.append(rec)
                if not inflight:
                    clean = self._clean = True
                    return
                rec = inflight[0]
                n = len(rec.indices) if self._auto_collation else 1
                t0 = time.perf_counter()
                while rec.done < n and rec.error is None:
                    fast_decided = self._pump(pool, tasks, slots, fast_decided, t0, window)
                    if gen != self._gen:
                        return
                    if self._target != pool.target and self._target > 0:
                        pool.resize(self._target)
                self._wait_s += time.perf_counter() - t0
                inflight.popleft()
                if rec.error is not None:
                    rec.error.reraise()
                out = self._finish(rec, slots, n)
                if rec.slot >= 0:
                    slots.free.append(rec.slot)
                st["done"] += 1
                self._stats["batches"] += 1
                self._stats["samples"] += n
                yield self._pin(out)
        finally:
            # Slots still held by unfinished batches come back; a worker may
            # still write into them, so a new iteration needs a fresh pool.
            if gen == self._gen and not clean:
                for rec in inflight:
                    if rec.slot >= 0:
                        slots.free.append(rec.slot)
            if state["pool"] is pool and (not clean or not self.persistent_workers):
                state["pool"] = None
                pool.close()

    def _pump(self, pool, tasks, slots, fast_decided, t0, window):
        """Wait for and handle worker messages; raise on death or timeout."""
        remaining = None
        if self.timeout and self.timeout > 0:
            remaining = self.timeout - (time.perf_counter() - t0)
            if remaining <= 0:
                raise RuntimeError(f"sluice GenericLoader timed out after {self.timeout} seconds")
        wait_s = _POLL_S if remaining is None else min(_POLL_S, remaining)
        sentinels = [p.sentinel for p, _ in pool.workers.values()]
        ready = mp_connection.wait([pool.res_r] + sentinels, wait_s)
        while pool.res_r.poll(0):
            kind, t, wid, busy, payload = pickle.loads(pool.res_r.recv_bytes())
            pool.busy[wid] += busy
            if kind == "x":
                pool.worker_exited(wid)
                continue
            if kind == "e" and t < 0:
                payload.reraise()
            if kind == "o":
                rec, j, _ = tasks[t]
                k, sample = payload
                rec.objs[j + k] = sample
                self._stats["pickled"] += 1
                if not fast_decided:
                    fast_decided = True
                    spec = _spec_of(sample)
                    if spec is not None:
                        cap = self.batch_size or max(len(rec.indices), 1)
                        slots.create(spec, cap, 2 * window)
                        pool.set_layout(slots.layout)
                continue
            rec, j, cnt = tasks.pop(t)
            if kind == "e" and rec.error is None:
                rec.error = payload
            if kind == "k":
                self._count_fast(payload)
            rec.done += cnt
        if any(s in ready for s in sentinels):
            pool.check_dead()
        return fast_decided

    def _finish(self, rec, slots, n):
        if not self._auto_collation:
            return self.collate_fn(rec.objs[0])
        views = slots.views[rec.slot] if rec.slot >= 0 else None
        if views is not None and not rec.objs:
            self._stats["fast_batches"] += 1
            if len(slots.held) < self._window:
                leaves = slots.lend(rec.slot, n)
                rec.slot = -1  # the caller's now; back to free when collected
            else:  # the caller keeps many batches: copy, keep the ring bounded
                leaves = [v[:n].clone() for v in views]
            return _unflatten(slots.layout.spec, leaves, batched=True)
        samples = []
        for j in range(n):
            if j in rec.objs:
                samples.append(rec.objs[j])
            else:
                samples.append(_unflatten(slots.layout.spec, [v[j] for v in views], batched=False))
        return self.collate_fn(samples)
