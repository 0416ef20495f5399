"""Exact fast path for torchvision image folders in generic mode.

``plan(dataset)`` looks at a map-style dataset once, in each worker.  When it
is a torchvision ``DatasetFolder`` / ``ImageFolder`` (possibly inside
``Subset``\\ s) that loads with torchvision's PIL loader and whose transform
starts with ``RandomResizedCrop`` or ``Resize`` (bilinear, the default), it
returns a function computing ``dataset[i]`` without PIL's decode and resize
(for ``Resize`` steps 2-3 decode the whole image and resize it to the size
``F.resize`` computes):

1. read the file; if it is a JPEG, take its size from the header;
2. draw the crop with the transform's own ``get_params`` -- the same torch
   RNG draws, in the same order, as ``RandomResizedCrop.forward``;
3. have sluice decode only the rows and columns the crop needs and resample
   them with PIL's fixed-point bilinear weights and pass order
   (``_sluice.image_transform(..., dct_scale=False, strict=True)``): the same
   bytes as ``Image.open(f).convert("RGB").crop(box).resize(size, BILINEAR)``;
4. run the rest of the transform (flip, to-tensor, normalize, ...) and
   ``target_transform`` unchanged on the result.

The returned function gives ``None`` when sluice does not handle the file
(not a JPEG, a header or data sluice rejects, even one corrupt-data warning),
with the torch RNG as it found it: the caller then runs the ordinary
``dataset[i]``, so PIL's own tolerance or error decides, exactly as without
sluice.  The pixels are equal, not close: tests/python/test_fastpath.py
compares them on every photo of the ImageNet sample and on every JPEG
flavour we make.

One difference is visible, and only to code that looks for it: the image the
rest of the transform receives has an empty ``info`` dict (PIL's resize
keeps the JPEG's ``info``: dpi, exif bytes, ICC profile).
"""

import torch

__all__ = ["plan"]

_JPEG_MAGIC = b"\xff\xd8\xff"


def _unwrap(dataset):
    """(DatasetFolder, index map or None) through plain Subsets."""
    from torch.utils.data import Subset

    maps = []
    ds = dataset
    while isinstance(ds, Subset) and type(ds).__getitem__ is Subset.__getitem__:
        maps.append(ds.indices)
        ds = ds.dataset
    return ds, maps


def plan(dataset):
    """(getitem or None, reason): see the module docstring."""
    try:
        from . import _sluice
    except ImportError as e:  # pure-Python install: nothing to speed up with
        return None, f"sluice._sluice is not importable ({e})"
    try:
        import torchvision
        from torchvision import transforms as T
        from torchvision.datasets import DatasetFolder
        from torchvision.datasets.folder import default_loader, pil_loader
        from torchvision.transforms import InterpolationMode
    except ImportError as e:
        return None, f"torchvision is not importable ({e})"

    ds, maps = _unwrap(dataset)
    if not isinstance(ds, DatasetFolder) or type(ds).__getitem__ is not DatasetFolder.__getitem__:
        return None, f"{type(ds).__name__} is not a torchvision DatasetFolder with its own __getitem__"
    if ds.loader is not pil_loader and not (ds.loader is default_loader
                                            and torchvision.get_image_backend() == "PIL"):
        return None, "the dataset's loader is not torchvision's PIL loader"
    tf = ds.transform
    if type(tf) is T.Compose and tf.transforms:
        first, rest = tf.transforms[0], list(tf.transforms[1:])
    else:
        first, rest = tf, []
    if type(first) not in (T.RandomResizedCrop, T.Resize):
        return None, "the transform does not start with RandomResizedCrop or Resize"
    if first.interpolation != InterpolationMode.BILINEAR or first.antialias is False:
        return None, f"{type(first).__name__} is not bilinear with antialiasing"
    if type(first) is T.RandomResizedCrop:
        if len(first.size) != 2 or "get_params" in vars(first):
            return None, "RandomResizedCrop with an unusual size or get_params"
        geometry = _rrc_geometry(first)
        what = "RandomResizedCrop: exact JPEG crop-decode"
    else:
        geometry = _resize_geometry(first)
        if geometry is None:
            return None, "Resize: an unusual size, or no _compute_resized_output_size here"
        what = "Resize: exact JPEG decode + resize"

    samples = ds.samples
    target_transform = ds.target_transform
    info, transform = _sluice.image_info, _sluice.image_transform
    Error = _sluice.Error
    get_rng_state, set_rng_state = torch.random.get_rng_state, torch.random.set_rng_state
    from PIL import Image

    def getitem(index):
        for m in maps:  # outermost Subset first, as Subset.__getitem__ nests
            index = m[index]
        path, target = samples[index]
        try:
            with open(path, "rb") as f:
                data = f.read()
        except OSError:
            return None  # the ordinary path raises the same error
        if data[:3] != _JPEG_MAGIC:
            return None
        try:
            w, h = info(data)
        except Error:
            return None
        bomb = Image.MAX_IMAGE_PIXELS
        if bomb is not None and w * h > bomb:
            return None  # PIL warns (or raises): let it
        rng = get_rng_state()
        box, size = geometry(w, h)
        try:
            a = transform(data, crop=box, size=size, layout="hwc", dct_scale=False, strict=True)
        except (Error, ValueError):
            set_rng_state(rng)  # as if nothing had run
            return None
        img = Image.fromarray(a)
        for t in rest:
            img = t(img)
        if target_transform is not None:
            target = target_transform(target)
        return img, target

    return getitem, f"torchvision DatasetFolder + {what}"


def _rrc_geometry(rrc):
    """(w, h) -> ((x, y, w, h) box, (w, h) output) as RandomResizedCrop.forward
    draws it: its own get_params, on something of the image's shape."""
    get_params, scale, ratio = rrc.get_params, rrc.scale, rrc.ratio
    out = (int(rrc.size[1]), int(rrc.size[0]))
    one = torch.empty(())  # get_params only reads the shape of what it is given

    def geometry(w, h):
        top, left, ch, cw = get_params(one.expand(3, h, w), scale, ratio)
        return (left, top, cw, ch), out

    return geometry


def _resize_geometry(resize):
    """(w, h) -> (None: the whole image, (w, h) output) as F.resize computes
    it for a PIL image (an unchanged size is an identity resample: the same
    pixels as F.resize's early return)."""
    from torchvision.transforms import functional as F

    compute = getattr(F, "_compute_resized_output_size", None)
    if compute is None or resize.size is None:
        return None
    size = [resize.size] if isinstance(resize.size, int) else list(resize.size)
    max_size = resize.max_size
    if len(size) not in (1, 2) or (max_size is not None and len(size) != 1):
        return None  # F.resize raises: let it

    def geometry(w, h):
        oh, ow = compute((h, w), size, max_size)
        return None, (int(ow), int(oh))

    return geometry
