"""sluice: a data loader for training, written in C.

    import sluice
    for images, labels in sluice.Loader("data/train", batch_size=256,
                                        image_size=224, dtype="float32"):
        ...   # numpy arrays: N x 3 x 224 x 224 float32, N int64

`images` and `labels` are views of the engine's batch buffer, not copies;
the buffer returns to the engine's pool when both arrays (and anything made
from them without a copy, e.g. torch.from_numpy) are gone. Keep a batch as
long as you like: the engine then allocates another buffer.

PyTorch users: `sluice.torch.DataLoader` (imports torch only when used).

Volumes: `sluice.load_volume(path)` gives a NIfTI-1/-2 file's (array,
affine) as nibabel does (`orient="ras"`: as_closest_canonical);
`sluice.volume_info`; `sluice.VolumeDataset` (KiTS19 layout, list files,
packs of volumes) loads cases.

`sluice.analyze` and `sluice.calibrate` are the `sluice analyze` and
`sluice calibrate` tools as calls returning dicts.
"""
import json
import os
import sys


def _cuda_wheel_folders():
    """The folders of sys.path that hold NVIDIA's wheels (nvidia/), as
    absolute paths: the GPU stage looks for the CUDA runtime and nvJPEG
    there first after the system's search (SL_PYTHON_SITE, src/gpu/rt.h),
    so `pip install nvidia-nvjpeg nvidia-cuda-runtime` is found in any
    Python: a venv, pyenv, conda, --user. Entries that are not str paths,
    or hold the separator, are left out."""
    found = []
    for p in sys.path:
        if not isinstance(p, str) or not p or os.pathsep in p:
            continue
        p = os.path.abspath(p)
        if os.path.isdir(os.path.join(p, "nvidia")) and p not in found:
            found.append(p)
    return found


def _python_site():
    """SL_PYTHON_SITE for this process: its own folders first, then those
    it inherited (a parent's, or the user's) that are not among them."""
    own = _cuda_wheel_folders()
    inherited = os.environ.get("SL_PYTHON_SITE", "").split(os.pathsep)
    return os.pathsep.join(own + [p for p in inherited if p and p not in own])


# Before the engine is loaded: it reads it when a GPU stage is first made.
os.environ["SL_PYTHON_SITE"] = _python_site()

from . import _sluice  # noqa: E402
from ._sluice import (Error, Loader, NotFoundError, TextLoader, image_info,  # noqa: E402
                      image_transform, load_volume, version, volume_dataset, volume_info)

__all__ = ["Error", "Loader", "NotFoundError", "TextLoader", "VolumeDataset", "analyze",
           "calibrate", "image_info", "image_transform", "load_volume", "version",
           "volume_dataset", "volume_info"]
__version__ = version


def analyze(source, *, step_ms=None, rate=None, sweep=False, batch_size=None,
            image_size=None, dtype="uint8", threads=None, prefetch=None, seconds=None,
            verbose=False):
    """Which bound stalls a job reading `source` (an ImageFolder, a shard
    folder or one shard): "fetch", "prep" or "consumer", by how much, and
    the figures behind it, as `sluice analyze --json` gives them.

    The consumer's demand is `step_ms` (it holds each batch that long) or
    `rate` (samples/s), or `sweep=True` checks at 50%, 100% and 150% of the
    prep rate. `threads` (default: the cores) are the job's decode threads;
    prep is measured for 1..threads, each run `seconds` long (default 10),
    so a call takes about (threads + 2) x seconds plus two reads of the
    dataset (the GIL is released meanwhile). batch_size (64), image_size
    (224), dtype and prefetch (max(2 x threads, 8)) are the job's; None
    leaves each to the library's default. `verbose` prints progress to
    stderr.

    Returns a dict: "bound", "predicted_stall", "measured_stall",
    "demand_rate", "prep_rate", "prep_rate_by_threads", "fetch_rate_cold",
    "fetch_rate_warm", "threads_needed", "cache_bytes_needed",
    "bandwidth_needed_bytes_per_s", "dataset_bytes", ... ("sweep": the
    three levels). ValueError for bad options, sluice.Error when the source
    cannot be read."""
    opt = dict(step_ms=step_ms, rate=rate, batch_size=batch_size, image_size=image_size,
               threads=threads, prefetch=prefetch, seconds=seconds)
    text = _sluice._analyze(os.fspath(source), sweep=sweep, dtype=dtype, verbose=verbose,
                            **{k: v for k, v in opt.items() if v is not None})
    return json.loads(text)


class VolumeDataset:
    """A volume dataset: a KiTS19-layout folder (CASE/imaging.nii.gz +
    CASE/segmentation.nii.gz), a list file of "IMAGE [LABEL]" lines, or a
    pack written by `sluice pack --volumes`. A case without a label volume
    is an error unless `unlabeled`.

        ds = sluice.VolumeDataset("kits19/data")
        (image, affine), (label, label_affine) = ds[0]

    `ds.cases`: [(name, image_path, label_path, has_label)] (paths None in
    a pack). `ds.load(i, orient="stored", native=False, max_bytes=None)`:
    the image and its label volume (None, None when it has none) as
    `load_volume` gives them; several threads may load at once (the GIL is
    released)."""

    def __init__(self, path, unlabeled=False):
        self._h = _sluice._volume_dataset_open(os.fspath(path), bool(unlabeled))
        self.cases = _sluice._volume_dataset_cases(self._h)

    def __len__(self):
        return len(self.cases)

    def load(self, i, orient="stored", native=False, max_bytes=None):
        if max_bytes is not None and max_bytes < 0:
            raise ValueError("max_bytes must be >= 0")
        return _sluice._volume_dataset_load(self._h, i, orient, bool(native),
                                            int(max_bytes or 0))

    def __getitem__(self, i):
        if i < 0:
            i += len(self)
        return self.load(i)


def _zero_as_none(name, v):
    """None -> 0 (the library's default); 0 -> -1 (the library's "none")."""
    if v is not None and not v >= 0:
        raise ValueError(f"{name} must be >= 0, not {v!r}")
    return 0.0 if v is None else (-1.0 if v == 0 else float(v))


def calibrate(telemetry_path, *, skip_s=None, step_ms=None, consumer_cpu=0.0,
              batch_bytes=None, storage_bw=0.0, storage_latency_ms=0.0):
    """A simulator profile fitted to the telemetry JSON Lines of one real
    run (`sluice run --telemetry FILE`, or Loader(telemetry_path=...)), as
    `sluice calibrate` fits it.

    `skip_s`: warm-up seconds left out (None: 1). `step_ms`: the consumer
    step the run used (None: inferred). `consumer_cpu` (0..1), `batch_bytes`
    (None: batch x 224 x 224 x 3), `storage_bw` (bytes/s, 0: page cache) and
    `storage_latency_ms`: what the run had, which the fit cannot see.

    Returns {"profile": {...}, "fit": {...}}: the profile as `sluice
    calibrate -o` writes it (json.dump it for `sluice simulate --profile`),
    and the fit ("core_share", "decode_ms", "foreign_demand", ...).
    ValueError for bad options, sluice.Error when the file cannot be read or
    holds too few steady periods."""
    text = _sluice._calibrate(os.fspath(telemetry_path), skip_s=_zero_as_none("skip_s", skip_s),
                              step_ms=_zero_as_none("step_ms", step_ms), consumer_cpu=consumer_cpu,
                              batch_bytes=batch_bytes or 0.0, storage_bw=storage_bw,
                              storage_latency_ms=storage_latency_ms)
    return json.loads(text)
