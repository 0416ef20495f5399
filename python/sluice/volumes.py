"""3-D U-Net training patches from NIfTI volumes (the MLPerf KiTS19
pipeline), for a MONAI or plain-PyTorch training loop:

    from sluice.volumes import DataLoader
    loader = DataLoader("kits19/data", batch_size=2, patch=(128, 128, 128))
    for epoch in range(epochs):
        for image, label in loader:     # torch tensors (n, 1, z, y, x):
            ...                          # float32 and uint8

The dataset is a KiTS19 folder (case_XXXXX/imaging.nii.gz +
segmentation.nii.gz) or a list file ("image [label]" per line). Offline,
once per case (cached within `cache_bytes`: None, the default, 2 GiB; 0
no cache, as for sluice.torch: a case is prepared again at each use; a
`batch_size` under 1 is refused, as there): resample to `target_spacing`
(trilinear / nearest), clip to [-79, 304] and z-score (mean 101, sd 76.9),
edge-pad to the patch. Online, per case and epoch: a foreground-biased
random crop (oversampling 0.4), flips (1/3 per axis), brightness (0.1) and
Gaussian noise (0.1) — the reference's transforms with sluice's counter
RNG: a patch depends on (seed, epoch, case) only, never on threads.

Patches come in the volume's storage order (C-order (z, y, x): the
transpose of nibabel's (x, y, z) array), while `patch=` and
`target_spacing=` are given in nibabel's (x, y, z) order, as the reference
gives them: patch=(128, 128, 64) makes arrays of shape (n, 1, 64, 128, 128). `balance=True` (the default) starts
the samples predicted to be most expensive first within the prefetch
window; `stats()` reports predicted and measured costs, consumer wait and
batch-ready latency (p50, p99).

`memory_bytes` bounds what the loader holds at once (batch buffers, the
cache, offline stages in flight, which stream each volume a slice at a
time; 0, the default: half the cgroup's memory limit where one is set,
else no bound but the cache's); `dtype="bfloat16"` gives bfloat16 image patches (rounded to nearest
even; without torch, their bits as uint16).

Each `for` loop is one epoch of the stream, ended by the batches' own
(epoch, index): a loop left early (break, an error) ends its epoch, and the
next loop starts at the next epoch's first batch (what was left of the
interrupted epoch is read and dropped). `state_dict()` is the exact
position after the batches consumed; `load_state_dict()` makes the next
loop yield exactly the rest of that epoch (the engine is made again there:
its case cache starts empty), and `set_epoch(e)` starts epoch e (right
after a load of a position in epoch e it keeps that position, as
sluice.torch.DataLoader).

A case that cannot be made (a damaged file, a label that is not class
indices 0..255) fails its batch: `on_error="fail"` (the default) raises
there. With `on_error="skip"` the case is left out of its batch, which comes
with the rest (fewer patches, in order: which cases fail does not depend on
threads, so the stream stays a function of (seed, epoch, index)); a case bad
when the loader opens is left out of every epoch; `skipped()` lists them,
`stats()["skipped"]` counts them. `unlabeled=True` accepts cases without a
label (an all-zero one).
"""
import operator

from . import _sluice

# The options a saved position is valid only with (the stream is a
# function of them, the seed, the epoch and the index).
_STATE_CHECKED = ("seed", "batch_size", "patch", "target_spacing",
                  "oversampling", "flip_prob", "brightness_prob", "noise_prob",
                  "bfloat16", "on_error", "unlabeled")


class DataLoader:
    def __init__(self, dataset, batch_size=2, patch=(128, 128, 128), seed=0, threads=0,
                 prefetch=0, balance=True, cache_bytes=None, target_spacing=(1.6, 1.2, 1.2),
                 oversampling=0.4, flip_prob=1 / 3, brightness_prob=0.1, noise_prob=0.1,
                 tensors=True, memory_bytes=0, dtype="float32", on_error="fail",
                 unlabeled=False):
        if dtype not in ("float32", "bfloat16"):
            raise ValueError(f"dtype {dtype!r}: 'float32' or 'bfloat16'")
        if on_error not in ("fail", "skip"):
            raise ValueError(f"on_error {on_error!r}: 'fail' or 'skip'")
        self._args = (str(dataset),)
        self._kw = dict(
            batch_size=batch_size, patch=tuple(patch), seed=seed,
            threads=threads, prefetch=prefetch, balance=balance, cache_bytes=cache_bytes,
            target_spacing=tuple(target_spacing), oversampling=oversampling,
            flip_prob=flip_prob, brightness_prob=brightness_prob, noise_prob=noise_prob,
            memory_bytes=memory_bytes, bfloat16=dtype == "bfloat16", on_error=on_error,
            unlabeled=bool(unlabeled))
        self._tensors = tensors
        self._resume = None  # load_state_dict's position, not yet begun
        self._open(0)

    def _open(self, start):
        """The engine, its stream starting at position `start`."""
        self._l = _sluice.VolumeLoader(*self._args, start=start, **self._kw)
        self.epoch = start // self._l.batches_per_epoch  # the next `for` loop's
        self._pos = start  # the stream position (epoch x batches + index) next() is at
        self._held = None  # a batch of a later epoch, read when a loop ended

    def _seek(self, epoch, batch):
        """The next `for` loop yields epoch `epoch` from batch `batch`: the
        engine is made again there (its case cache starts empty) unless it
        is already there."""
        nb = self._l.batches_per_epoch
        if not 0 <= batch <= nb or epoch < 0:
            raise ValueError(f"position (epoch {epoch}, batch {batch}) is outside "
                             f"epoch >= 0, batch 0..{nb}")
        g = epoch * nb + batch
        if self._held is None and self._pos == g:  # the stream is there
            self.epoch = g // nb
            return
        self._l.close()
        self._open(g)

    def set_epoch(self, epoch):
        """The next `for` loop yields epoch `epoch` from its first batch, or,
        right after load_state_dict of a position in that epoch, from that
        position (as sluice.torch.DataLoader). The engine is made again
        when the stream is elsewhere (a loop left early, a jump)."""
        epoch = operator.index(epoch)
        if epoch < 0:
            raise ValueError("epoch must be >= 0")
        if self._resume is not None and self._resume[0] == epoch:
            return
        self._resume = None
        self._seek(epoch, 0)

    def state_dict(self):
        """The exact position after the batches consumed so far
        ({"epoch", "batch"}), and the options that decide the stream, for
        load_state_dict on a loader made with the same ones."""
        nb = self._l.batches_per_epoch
        h = self._held
        g = h["epoch"] * nb + h["index"] if h is not None else self._pos
        e, b = divmod(g, nb)
        return {"epoch": e, "batch": b, "batches_per_epoch": nb,
                **{k: self._kw[k] for k in _STATE_CHECKED}}

    def load_state_dict(self, state):
        """The next `for` loop yields exactly the batches of state's epoch
        from state's batch on, as an uninterrupted run would; a state of
        other stream options is refused (ValueError)."""
        mine = self.state_dict()
        for k in _STATE_CHECKED + ("batches_per_epoch",):
            if k in state and state[k] != mine[k]:
                raise ValueError(f"state_dict was saved with {k}={state[k]!r}, "
                                 f"this loader has {mine[k]!r}")
        self._seek(int(state["epoch"]), int(state["batch"]))
        self._resume = (int(state["epoch"]), int(state["batch"]))

    def __len__(self):
        return self._l.batches_per_epoch

    def _next(self):
        nb = self._l.batches_per_epoch
        if self._held is not None:
            b, self._held = self._held, None
            return b
        try:
            b = self._l.next()
        except Exception:
            # the stream is past the failed batch (and any it passed over)
            self._pos = self._l.position
            raise
        self._pos = b["epoch"] * nb + b["index"] + 1
        self.epoch = max(self.epoch, b["epoch"] + (b["index"] == nb - 1))
        return b

    def __iter__(self):
        self._resume = None
        torch = None
        if self._tensors:
            import torch
        nb = self._l.batches_per_epoch
        epoch = self.epoch
        try:
            while True:
                try:
                    b = self._next()
                except Exception:
                    if (self._pos - 1) // nb < epoch:
                        continue  # a failed batch of an epoch left early
                    raise
                if b["epoch"] < epoch:
                    continue  # the rest of an epoch left early
                if b["epoch"] > epoch:  # every batch left was skipped
                    self._held = b
                    return
                if torch is None:
                    yield b["image"], b["label"]
                else:
                    img = torch.from_numpy(b["image"])
                    if b["dtype"] == "bfloat16":
                        img = img.view(torch.bfloat16)
                    yield img, torch.from_numpy(b["label"])
                if b["index"] == nb - 1:
                    return
        finally:
            # never backwards: a loop left early and dropped late (its
            # generator collected after later loops) does not move it
            self.epoch = max(self.epoch, epoch + 1)

    def next_batch(self):
        """The next batch as a dict: epoch, index, image, label (numpy), cases."""
        return self._next()

    def skipped(self):
        """Messages of the cases skipped so far (on_error='skip'):
        'create: FILE: cause' or 'epoch E: case NAME: cause'."""
        return self._l.skipped()

    def stats(self):
        return self._l.stats()

    def reset_stats(self):
        """Zeroes the counters and the latency window (after a warm-up);
        stats()["skipped"] then counts the skips since, create-time ones
        not included, while skipped() still lists the skips since create
        (the first 10,000)."""
        self._l.reset_stats()

    def close(self):
        self._l.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
