"""sluice.torch.DataLoader: a drop-in for torch.utils.data.DataLoader.

Native mode, `source=` an ImageFolder tree or packed shards: decoding and
augmentation run in sluice's C engine; each batch is `(images, labels)`,
torch tensors made with torch.from_numpy over the engine's batch buffer (no
copy; the buffer goes back to the pool when the tensors are gone)::

    loader = sluice.torch.DataLoader(source="data/train", batch_size=64,
                                     image_size=224, shuffle=True, seed=0,
                                     dtype=torch.float32)
    for epoch in range(start, epochs):
        loader.set_epoch(epoch)
        for images, labels in loader:
            ...

Generic mode, `dataset=` any map-style torch Dataset (first positional
argument, as torch's): handed to sluice._generic.GenericLoader.

One iteration is one epoch. Without set_epoch the epochs advance by
themselves (0, 1, 2, ...: a new shuffle each, as torch's shuffling does).
state_dict() is the exact position after the batches consumed so far;
load_state_dict() makes the next iteration yield exactly the rest of that
epoch, bit for bit (torch's own DataLoader cannot resume mid-epoch); the
loop above resumes as it is, from `start = ckpt["epoch"]`: set_epoch of
the loaded epoch keeps the loaded position.

A native loader runs one iteration at a time (one engine): a new
iter(loader), or load_state_dict(), while an iterator is live supersedes
it, and that iterator's next next() raises RuntimeError saying so (torch's
iterators are independent; here two streams need two loaders).
set_epoch() during an iteration applies to the next one, as torch's.

torch is imported only when a DataLoader is made, so `import sluice` needs
no torch.
"""
import operator
import os
import warnings

from . import _sluice

__all__ = ["DataLoader", "NativeDataset", "TextLoader"]

_NATIVE_DEFAULTS = {"batch_size": 64, "shuffle": True}
_GENERIC_DEFAULTS = {"batch_size": 1, "shuffle": False}
# batch_size not given (a None given turns batching off in generic mode,
# as torch's batch_size=None does)
_UNSET = type("_Unset", (), {"__repr__": lambda self: "<default>"})()
# Options whose change makes a saved position mean other batches.
_STATE_CHECKED = ("batch_size", "world_size", "drop_last", "seed",
                  "shuffle", "batches_per_epoch")


def _dtype_name(torch, dtype):
    if dtype is None:
        return "uint8"
    if dtype in (torch.uint8, "uint8"):
        return "uint8"
    if dtype in (torch.float32, "float32", "float"):
        return "float32"
    raise ValueError(f"dtype must be torch.uint8 or torch.float32, not {dtype!r}")


def _dist_defaults(torch, rank, world_size):
    dist = getattr(torch, "distributed", None)
    if dist is not None and dist.is_available() and dist.is_initialized():
        if rank is None:
            rank = dist.get_rank()
        if world_size is None:
            world_size = dist.get_world_size()
    return (0 if rank is None else rank,
            1 if world_size is None else world_size)


def _cuda_host_alloc(device):
    """(cudaHostAlloc, cudaFreeHost, cudaSetDevice) addresses of the CUDA
    runtime torch has loaded and the trainer's GPU (device's, else the
    current one), for sluice.Loader(host_alloc=...): the engine's threads
    set that GPU before they allocate, as torch's pin thread does (else
    each makes a context on GPU 0, in every DDP rank)."""
    import ctypes

    import torch

    torch.cuda.init()
    gpu = _trainer_gpu(torch, device)
    if gpu is None:
        gpu = torch.cuda.current_device()
    path = None
    with open("/proc/self/maps") as f:
        for line in f:
            name = line.rsplit(None, 1)[-1]
            if "/libcudart.so" in name:
                path = name
                break
    lib = ctypes.CDLL(path) if path else None
    if lib is None:  # statically linked into torch
        lib = ctypes.CDLL(None)
    try:
        return (ctypes.cast(lib.cudaHostAlloc, ctypes.c_void_p).value,
                ctypes.cast(lib.cudaFreeHost, ctypes.c_void_p).value,
                ctypes.cast(lib.cudaSetDevice, ctypes.c_void_p).value, gpu)
    except AttributeError as e:
        raise RuntimeError("pin_memory=True: no CUDA runtime found in the "
                           "process (" + str(e) + ")") from None


class _Run:
    """One iteration of an engine-backed loader. `ended` says what
    superseded it (None while it is the live one); `then` is the position
    set_epoch gave for after it (None: where it stops)."""

    __slots__ = ("ended", "then")

    def __init__(self):
        self.ended = None
        self.then = None


class _Position:
    """Where the next iteration of an engine-backed loader begins, shared by
    DataLoader (native mode) and TextLoader: an iteration is one epoch from
    _start; state_dict's position is the engine's while one runs.

    One engine streams one iteration: a new iter() or load_state_dict()
    ends the live one, whose iterator then raises (_check_run) rather
    than take batches of the new stream or stop as if its epoch were
    done."""

    def _position_init(self):
        self._start = (0, 0)  # where the next iteration begins
        self._saved = (0, 0)  # state_dict's position between iterations
        self._run = None      # the iteration under way (_Run), or None
        self._resume = None   # load_state_dict's position, not yet begun

    def _supersede(self, why):
        if self._run is not None:
            self._run.ended = why
            self._run = None

    def _begin(self):
        """Starts the engine at _start and returns the new iteration.
        Started here, not at the first next(), so batches are being
        prepared while the caller sets up its step."""
        epoch, batch = self._start
        self._supersede("a newer iter(loader)")
        self._resume = None
        self._loader.start(epoch, batch)
        # the engine's position: a saved (e, batches per epoch) is (e + 1, 0)
        self._start = (self._loader.position[0] + 1, 0)
        self._run = _Run()
        return self._run

    def _check_run(self, run):
        """Raises RuntimeError when `run` is no longer the live iteration."""
        if self._run is not run:
            name = type(self).__name__
            why = run.ended or "a newer iteration"
            raise RuntimeError(
                f"this {name} iterator was superseded by {why}: a sluice "
                f"{name} runs one iteration at a time (one engine), "
                "and starting another ends the one before; iterate it once "
                f"per epoch, or make two {name}s for two streams")

    def _end_run(self, run):
        """The generator of `run` is done (exhausted, left or closed)."""
        if self._run is run:
            self._run = None
            # Left early (break) or not, the next iteration is a new
            # epoch, as torch's; state_dict keeps the exact position.
            self._saved = run.then or self._loader.position

    def _set_epoch(self, epoch):
        epoch = operator.index(epoch)
        if epoch < 0:
            raise ValueError("epoch must be >= 0")
        if self._resume is not None and self._resume[0] == epoch:
            # The resume loop's set_epoch(ckpt["epoch"]) at the top of the
            # loaded epoch keeps load_state_dict's position (as generic
            # mode and a stateful sampler do); another epoch drops it.
            self._start = self._resume
            return
        self._resume = None
        self._start = (epoch, 0)
        if self._run is not None:
            self._run.then = self._start  # the live iteration goes on
        else:
            self._saved = self._start

    def _position(self):
        return self._loader.position if self._run is not None else self._saved

    def _load_position(self, state, checked):
        mine = self.state_dict()
        for k in checked:
            if k in state and state[k] != mine[k]:
                raise ValueError(f"state_dict was saved with {k}={state[k]!r}, "
                                 f"this loader has {mine[k]!r}")
        self._supersede("load_state_dict()")
        self._start = self._saved = self._resume = (int(state["epoch"]),
                                                    int(state["batch"]))


def _trainer_gpu(torch, device):
    """The CUDA device the trainer runs on, for the GPU stage: device's
    index (cuda:N), else the current device where CUDA is initialised
    already (device="cuda", or no device while the training loop has set
    one up), else the launcher's local rank (_local_rank_gpu); None when
    none says (the stage's default, GPU 0). Never starts CUDA here: a
    context costs GPU memory and breaks a fork."""
    if device is not None and device.type == "cuda" and device.index is not None:
        return device.index
    if (device is None or device.type == "cuda") and torch.cuda.is_initialized():
        return torch.cuda.current_device()
    if device is None or device.type == "cuda":
        return _local_rank_gpu()
    return None


def _local_rank_gpu():
    """LOCAL_RANK (torchrun, torch.distributed.launch, accelerate) as the
    rank's GPU, as the trainer will set_device it, so that ranks built
    before CUDA is up do not all decode on GPU 0. Where CUDA_VISIBLE_DEVICES
    leaves a rank fewer GPUs than that (a launcher giving each rank its
    own), the rank's only one, 0; None without LOCAL_RANK, or where it
    names no visible GPU."""
    r = os.environ.get("LOCAL_RANK", "")
    if not r.isdigit():
        return None
    r = int(r)
    vis = os.environ.get("CUDA_VISIBLE_DEVICES")
    if vis is not None:
        n = len([v for v in vis.split(",") if v.strip()])
        if r >= n:
            return 0 if n == 1 else None
    return r


class NativeDataset:
    """DataLoader.dataset in native mode: a read-only view of the source
    the engine reads. len() is the samples of the whole source (all
    ranks, as len(dataset) under a DistributedSampler); classes and
    class_to_idx as torchvision's ImageFolder (class index = position in
    sorted order); root is the source as given. The engine decodes the
    samples: there is no indexing here."""

    def __init__(self, source, loader):
        self.root = source
        self._len = loader.num_samples
        self.classes = list(loader.classes)
        self.class_to_idx = {c: i for i, c in enumerate(self.classes)}

    def __len__(self):
        return self._len

    def __repr__(self):
        return (f"NativeDataset(root={self.root!r}, samples={self._len}, "
                f"classes={len(self.classes)})")


def _warn(msg, stacklevel=4):
    # stacklevel 4: the caller of DataLoader(...), through __init__ and
    # the helper that warns.
    warnings.warn(msg, UserWarning, stacklevel=stacklevel)


def _warn_no_pinning():
    # torch's words, so a filter written for torch's warning takes it.
    _warn("'pin_memory' argument is set as true but no accelerator is "
          "found, then device pinned memory won't be used.")


def _positive(name, v):
    """v as an int >= 1, else ValueError naming `name` (torch's words)."""
    try:
        n = operator.index(v) if not isinstance(v, bool) else None
    except TypeError:
        n = None
    if n is None or n < 1:
        raise ValueError(f"{name} should be a positive integer value, but "
                         f"got {name}={v!r}")
    return n


def _bool(name, v):
    """v, a bool, else ValueError naming `name` (torch's words: its
    BatchSampler refuses drop_last="no", which bool() would make True)."""
    if not isinstance(v, bool):
        raise ValueError(f"{name} should be a boolean value, but got "
                         f"{name}={v!r}")
    return v


def _square_size(v):
    """image_size as one int: n, or a square (n, n)."""
    if isinstance(v, (tuple, list)):
        if len(v) == 2 and v[0] == v[1]:
            v = v[0]
        else:
            raise ValueError(f"image_size={tuple(v)!r}: sluice makes square "
                             "images only; give one int n or (n, n)")
    return _positive("image_size", v)


def _native_options(num_workers, options):
    """Refuses, with what to do instead, the keyword options native mode
    sets itself (sluice.Loader would say 'multiple values')."""
    if "epochs" in options:
        raise TypeError(
            "epochs is not a DataLoader argument: one iteration is one epoch "
            "(iterate the loader once per epoch, set_epoch to choose which); "
            "for several epochs in one iteration use sluice.Loader(..., "
            "epochs=N)")
    if "threads" in options:
        raise TypeError("threads is num_workers in a DataLoader (the decode "
                        "threads; None or 0: one per core)")
    if num_workers is not None and (isinstance(num_workers, bool) or
                                    operator.index(num_workers) < 0):
        raise ValueError("num_workers option should be non-negative "
                         "(native mode: decode threads; None or 0: one per "
                         "core)")


def _native_ignored(timeout, persistent_workers, multiprocessing_context,
                    pin_memory_device):
    """Warns, once per call site, for torch's arguments that have nothing
    to act on in native mode."""
    del timeout  # honoured: sluice.Loader(timeout=)
    why = {
        "persistent_workers": (persistent_workers, "the engine's threads "
                               "always persist across epochs"),
        "multiprocessing_context": (multiprocessing_context, "native mode "
                                    "starts no processes (decode threads "
                                    "in C)"),
        "pin_memory_device": (pin_memory_device, "pin_memory=True pins for "
                              "CUDA (the engine allocates its buffers with "
                              "cudaHostAlloc)"),
    }
    for name, (v, reason) in why.items():
        if v:
            _warn(f"sluice.torch.DataLoader: {name}={v!r} does nothing in "
                  f"native mode (source=): {reason}")


class DataLoader(_Position):
    """DataLoader(dataset=None, batch_size=<default>, shuffle=None, ...,
    source=None, image_size=224, seed=None, device=None, rank=None,
    world_size=None, dtype=torch.uint8, **options)

    Native mode (source=..., or a path as the first argument: an
    ImageFolder, sluice shards, WebDataset .tar shards or TFRecord files,
    one path or a brace pattern "shard-{000..009}.tar"; shuffle_buffer=N
    for WebDataset's shuffle-buffer order): batch_size 64 and shuffle True
    by default;
    num_workers is the number of decode threads (None or 0: one per core);
    prefetch_factor: batches in flight per decode thread (sluice.Loader's
    prefetch = prefetch_factor x threads; the default is 2, as torch's);
    pin_memory=True, where CUDA is available, has the engine allocate its
    batch buffers page-locked (cudaHostAlloc), so batches come out pinned
    with no copy (without CUDA it does nothing and warns, as torch does);
    device="cuda" moves batches with non_blocking=True; seed=None takes a
    seed from generator= when one is given (one draw, at construction),
    else is 0 (as DistributedSampler's default, so DDP ranks agree);
    rank / world_size default to torch.distributed's when it is
    initialised; placement="gpu" decodes on the GPU with nvJPEG,
    on the trainer's GPU (device's cuda:N, else the current device, as
    does auto, the default, where the driver sees a GPU) unless gpu_device=
    says otherwise, and with device_batches=True its batches stay in GPU
    memory and come out as CUDA tensors without a copy (not yet measured
    on a GPU: opt-in; a batch's memory is reused only after the work
    queued on the stream current when it was handed out, as of when the
    tensor goes); other keyword options go to sluice.Loader
    (mode='eval', layout='hwc', on_error='skip', prefetch=..., mean=...,
    std=..., telemetry_ms=..., ...). sampler, batch_sampler, collate_fn
    and worker_init_fn are refused (the engine samples and collates);
    timeout (seconds) bounds each wait for a batch (RuntimeError after
    it, as torch's); persistent_workers, multiprocessing_context and
    pin_memory_device are accepted and do nothing (a warning says why).
    dataset is a NativeDataset (len(), classes, class_to_idx, root);
    skipped() lists the samples skipped under on_error='skip' ("epoch E:
    FILE: cause"). One iteration at a time: see the module's docstring.

    Generic mode (dataset=...): torch DataLoader's arguments, run by
    sluice._generic.GenericLoader (batch_size 1 by default, None: no
    automatic batching; multiprocessing_context "fork", the default,
    "spawn" or "forkserver", or a context); a torchvision ImageFolder whose transform
    starts with RandomResizedCrop or Resize is computed by sluice's decode with
    the same pixels as PIL's (sluice._fastpath; fast_path=False turns it
    off).
    """

    def __init__(self, dataset=None, batch_size=_UNSET, shuffle=None,
                 sampler=None, batch_sampler=None, num_workers=None,
                 collate_fn=None, pin_memory=False, drop_last=False,
                 timeout=0, worker_init_fn=None, multiprocessing_context=None,
                 generator=None, *, prefetch_factor=None,
                 persistent_workers=False, pin_memory_device="",
                 source=None, image_size=224, seed=None, device=None,
                 rank=None, world_size=None, dtype=None, **options):
        import torch

        self._torch = torch
        if isinstance(dataset, (str, bytes, os.PathLike)) and source is None:
            # A path where torch takes a Dataset: native mode's source (a
            # folder, shards, "shard-{000..009}.tar", a TFRecord file).
            dataset, source = None, dataset
        if (dataset is None) == (source is None):
            raise TypeError("DataLoader needs exactly one of dataset= (a "
                            "torch Dataset) or source= (a folder or shards)")
        if pin_memory and not torch.cuda.is_available():
            _warn_no_pinning()
        self.pin_memory = bool(pin_memory) and torch.cuda.is_available()
        self.device = torch.device(device) if device is not None else None
        self.drop_last = _bool("drop_last", drop_last)
        self._generic = None
        self._loader = None
        self._inflight = []  # (event, source tensor) of copies to the GPU
        if dataset is not None:
            self._init_generic(dataset, batch_size, shuffle, sampler,
                               batch_sampler, num_workers, collate_fn,
                               drop_last, seed, generator, prefetch_factor,
                               persistent_workers, timeout, worker_init_fn,
                               multiprocessing_context, options)
            return
        for name, v in (("sampler", sampler), ("batch_sampler", batch_sampler),
                        ("collate_fn", collate_fn),
                        ("worker_init_fn", worker_init_fn)):
            if v is not None:
                raise TypeError(f"{name} is for dataset= (generic mode); "
                                "native mode (source=) samples in the engine")
        _native_options(num_workers, options)
        _native_ignored(timeout, persistent_workers, multiprocessing_context,
                        pin_memory_device)
        if prefetch_factor is not None:
            if "prefetch" in options:
                raise TypeError("give prefetch_factor (per decode thread) or "
                                "prefetch (batches in flight), not both")
            prefetch_factor = _positive("prefetch_factor", prefetch_factor)
        if generator is not None:
            if seed is not None:
                raise ValueError("give seed or generator, not both")
            # One draw, as torch's RandomSampler takes its seed: 63 bits.
            seed = int(torch.empty((), dtype=torch.int64)
                       .random_(generator=generator).item())
        self.source = source
        if batch_size is None or batch_size is _UNSET:
            batch_size = _NATIVE_DEFAULTS["batch_size"]
        self.batch_size = _positive("batch_size", batch_size)
        self.shuffle = _NATIVE_DEFAULTS["shuffle"] if shuffle is None else bool(shuffle)
        self.seed = 0 if seed is None else operator.index(seed)
        self.rank, self.world_size = _dist_defaults(torch, rank, world_size)
        self.image_size = image_size = _square_size(image_size)
        threads = num_workers if num_workers else None
        if timeout:
            if timeout < 0:
                raise ValueError("timeout option should be non-negative")
            options["timeout"] = float(timeout)
        if self.pin_memory and "host_alloc" not in options:
            # The engine allocates its batch buffers page-locked, so
            # pinning costs no copy (torch's DataLoader copies each batch).
            options["host_alloc"] = _cuda_host_alloc(self.device)
        if options.get("placement") != "cpu" and "gpu_device" not in options:
            # A GPU stage (placement gpu, or auto: the default) decodes on
            # the trainer's GPU, so each DDP rank on its own:
            # device="cuda:N", else the current device
            # (torch.cuda.set_device(local_rank)) where CUDA is up, else
            # LOCAL_RANK.
            gpu = _trainer_gpu(torch, self.device)
            if gpu is not None:
                options["gpu_device"] = gpu
        self._loader = _sluice.Loader(
            source, self.batch_size, image_size, shuffle=self.shuffle,
            seed=self.seed, drop_last=self.drop_last, rank=self.rank,
            world_size=self.world_size, epochs=1, threads=threads,
            dtype=_dtype_name(torch, dtype), **options)
        if prefetch_factor is not None:
            # torch holds prefetch_factor batches per worker; the engine's
            # prefetch counts batches in flight over all its threads (its
            # default, 2 x threads, is torch's default). The start value:
            # policy='heuristic' tunes it from there.
            self._loader.set("prefetch", max(2, prefetch_factor *
                                             self._loader.get("threads")))
        self.dataset = NativeDataset(source, self._loader)
        self._position_init()

    def _init_generic(self, dataset, batch_size, shuffle, sampler,
                      batch_sampler, num_workers, collate_fn, drop_last,
                      seed, generator, prefetch_factor, persistent_workers,
                      timeout, worker_init_fn, multiprocessing_context,
                      options):
        fast_path = options.pop("fast_path", True)
        if options:
            raise TypeError("unexpected arguments for dataset= (generic "
                            f"mode): {', '.join(sorted(options))}")
        try:
            from ._generic import GenericLoader
        except ImportError as e:
            if e.name in ("sluice._generic", __name__.rpartition(".")[0] + "._generic"):
                raise ImportError(
                    "sluice.torch.DataLoader(dataset=...) (generic mode) "
                    "needs sluice/_generic.py, which this installation "
                    "lacks; native mode (source=...) works without it") from e
            raise
        self.dataset = dataset
        self.source = None
        # torch's batch_size=None: no automatic batching (samples one by
        # one, default_convert'ed)
        self.batch_size = (_GENERIC_DEFAULTS["batch_size"]
                           if batch_size is _UNSET else batch_size)
        self._generic = GenericLoader(
            dataset, batch_size=self.batch_size,
            shuffle=_GENERIC_DEFAULTS["shuffle"] if shuffle is None else bool(shuffle),
            sampler=sampler, batch_sampler=batch_sampler,
            num_workers=num_workers or 0, collate_fn=collate_fn,
            drop_last=drop_last, seed=seed, generator=generator,
            prefetch_factor=2 if prefetch_factor is None else prefetch_factor,
            persistent_workers=persistent_workers, timeout=timeout,
            worker_init_fn=worker_init_fn, fast_path=fast_path,
            multiprocessing_context=multiprocessing_context)

    # ------------------------------------------------------------ common

    def __iter__(self):
        if self._generic is not None:
            it = iter(self._generic)
            if not self.pin_memory and self.device is None:
                return it
            return (self._move_any(b) for b in it)
        return self._iter_native()

    def __len__(self):
        """Batches per epoch (this rank's share)."""
        if self._generic is not None:
            return len(self._generic)
        return self._loader.batches_per_epoch

    def set_epoch(self, epoch):
        """The next iteration streams epoch `epoch` from its first batch,
        or, right after load_state_dict of a position in that epoch, from
        that position (the resume loop's set_epoch at the top of the
        epoch)."""
        if self._generic is not None:
            return self._generic.set_epoch(epoch)
        self._set_epoch(epoch)

    def state_dict(self):
        """The exact position after the batches consumed so far."""
        if self._generic is not None:
            return self._generic.state_dict()
        epoch, batch = self._position()
        return {"epoch": epoch, "batch": batch, "seed": self.seed,
                "batch_size": self.batch_size, "world_size": self.world_size,
                "rank": self.rank, "drop_last": self.drop_last,
                "shuffle": self.shuffle,
                "batches_per_epoch": self._loader.batches_per_epoch}

    def load_state_dict(self, state):
        """The next iteration yields exactly the batches of state's epoch
        not yet consumed when it was saved; later ones continue normally."""
        if self._generic is not None:
            return self._generic.load_state_dict(state)
        self._load_position(state, _STATE_CHECKED)

    def stats(self):
        """Counters, knob values and the latest telemetry (a dict)."""
        if self._generic is not None:
            return self._generic.stats()
        return self._loader.stats()

    def skipped(self):
        """Native mode: the messages of the samples skipped so far under
        on_error='skip' ("epoch E: FILE: cause"), and the source's warnings
        found when it was opened, as sluice.Loader.skipped()."""
        if self._generic is not None:
            raise TypeError("skipped() is for native mode (source=); in "
                            "generic mode the Dataset's errors raise")
        return self._loader.skipped()

    def close(self):
        """Stops the engine (native mode) or the worker processes and their
        shared memory (generic mode); iterating after it raises."""
        if self._generic is not None:
            self._generic.close()
        if self._loader is not None:
            self._loader.close()

    @property
    def loader(self):
        """The sluice.Loader behind native mode (knobs: loader.set)."""
        return self._loader

    # ------------------------------------------------------------ native

    def _iter_native(self):
        return self._batches(self._begin())

    def _batches(self, run):
        from_numpy = self._torch.from_numpy
        move = self.pin_memory or self.device is not None
        try:
            while True:
                # Checked before taking a batch: a newer iteration's
                # batches come from the same engine.
                self._check_run(run)
                try:
                    images, labels = next(self._loader)
                except StopIteration:
                    return
                if hasattr(images, "__cuda_array_interface__"):
                    # A device batch (device_batches=True): a CUDA tensor
                    # over the GPU stage's memory, no copy; it keeps the
                    # batch out of the pool while it lives.
                    x = self._torch.as_tensor(
                        images, device=f"cuda:{images.device}")
                    # Fenced, when it goes, on the stream current now
                    # (the one the step reading it runs on): the buffer
                    # is written again only after that step's kernels.
                    images._batch.stream = self._torch.cuda.current_stream(
                        x.device).cuda_stream
                    y = from_numpy(labels)
                    if move:
                        y = self._move(y)
                    yield x, y
                    continue
                x, y = from_numpy(images), from_numpy(labels)
                if move:
                    x, y = self._move(x), self._move(y)
                yield x, y
        finally:
            self._end_run(run)

    def _move(self, t):
        if self.pin_memory and not t.is_pinned():
            t = t.pin_memory()  # a copy (generic mode's collated batches)
        if self.device is not None and self.device.type != "cpu":
            src = t
            t = t.to(self.device, non_blocking=True)
            if src.is_pinned() and self.device.type == "cuda":
                # An asynchronous copy reads the engine's buffer after this
                # returns: keep the buffer out of the pool until it is done.
                ev = self._torch.cuda.Event()
                ev.record()
                self._inflight.append((ev, src))
                self._inflight = [(e, x) for e, x in self._inflight
                                  if not e.query()]
        elif self.device is not None:
            t = t.to(self.device)
        return t

    def _move_any(self, obj):
        torch = self._torch
        if isinstance(obj, torch.Tensor):
            return self._move(obj)
        if isinstance(obj, (list, tuple)):
            return type(obj)(self._move_any(o) for o in obj)
        if isinstance(obj, dict):
            return {k: self._move_any(v) for k, v in obj.items()}
        return obj


# ---------------------------------------------------------------- text

# Not rank: a position is the same on every rank (nanoGPT saves the
# master's and every rank loads it). "fingerprint" (the engine's, of the
# tokenizer, its files, the documents and the options) catches another
# corpus or tokenizer; the others name the option that differs.
_TEXT_STATE_CHECKED = ("task", "seq_len", "batch_size", "world_size",
                       "drop_last", "seed", "shuffle", "fingerprint")


class TextLoader(_Position):
    """TextLoader(sources, *, task="lm", tokenizer=None, vocab, seq_len=None,
    batch_size=8, shuffle=True, seed=0, rank=None, world_size=None,
    device=None, **options)

    Text batches from sluice's C engine (docs/TEXT.md): each batch is a dict
    of int32 torch tensors made with torch.from_numpy over the
    engine's buffers (no copy): lm gives input_ids and labels (n x seq_len);
    mlm also attention_mask and token_type_ids. One iteration is one epoch;
    set_epoch / state_dict / load_state_dict as sluice.torch.DataLoader
    (state_dict is the exact position; resuming yields exactly the rest).
    rank / world_size default to torch.distributed's when initialised.
    Other keyword options go to sluice.TextLoader (merges=, threads=,
    doc_per_file=, on_error=, mask_prob=, chunk_bytes=, ...)."""

    def __init__(self, sources, *, task="lm", tokenizer=None, vocab=None,
                 seq_len=None, batch_size=8, shuffle=True, seed=0, rank=None,
                 world_size=None, drop_last=False, device=None, **options):
        import torch
        self._torch = torch
        rank, world_size = _dist_defaults(torch, rank, world_size)
        self.task, self.batch_size, self.shuffle = task, batch_size, shuffle
        self.seed, self.rank, self.world_size = seed, rank, world_size
        self.drop_last, self.device = _bool("drop_last", drop_last), device
        self._loader = _sluice.TextLoader(
            sources, task=task, tokenizer=tokenizer, vocab=vocab,
            seq_len=seq_len, batch_size=batch_size, shuffle=shuffle,
            seed=seed, rank=rank, world_size=world_size, drop_last=drop_last,
            epochs=1, **options)
        self.seq_len = self._loader.options["seq_len"]
        self._position_init()

    def __iter__(self):
        return self._batches(self._begin())

    def _batches(self, run):
        from_numpy = self._torch.from_numpy
        try:
            while True:
                self._check_run(run)  # before taking a batch: see DataLoader
                try:
                    d = next(self._loader)
                except StopIteration:
                    return
                out = {k: from_numpy(v) for k, v in d.items()}
                if self.device is not None:
                    out = {k: t.to(self.device, non_blocking=True)
                           for k, t in out.items()}
                yield out
        finally:
            self._end_run(run)

    def set_epoch(self, epoch):
        """As sluice.torch.DataLoader.set_epoch."""
        self._set_epoch(epoch)

    def state_dict(self):
        """The exact position after the batches consumed so far."""
        epoch, batch = self._position()
        return {"epoch": epoch, "batch": batch, "task": self.task,
                "seq_len": self.seq_len, "batch_size": self.batch_size,
                "world_size": self.world_size, "rank": self.rank,
                "drop_last": self.drop_last, "seed": self.seed,
                "shuffle": self.shuffle,
                "fingerprint": self._loader.fingerprint}

    def load_state_dict(self, state):
        """The next iteration yields exactly the batches of state's epoch
        not yet consumed when it was saved. A state of any rank will do
        (the position is the same on each); one of another corpus,
        tokenizer or stream option is refused (ValueError)."""
        self._load_position(state, _TEXT_STATE_CHECKED)

    def stats(self):
        return self._loader.stats()

    def skipped(self):
        return self._loader.skipped()

    def close(self):
        self._loader.close()

    @property
    def loader(self):
        """The sluice.TextLoader behind it."""
        return self._loader
