"""Exact fast path for torchvision image folders in generic mode.

``plan(dataset)`` looks at a map-style dataset once, in each worker.  When it
is a torchvision ``DatasetFolder`` / ``ImageFolder`` (possibly inside
``Subset``\\ s) that loads with torchvision's PIL loader and whose transform
starts with ``RandomResizedCrop`` or ``Resize`` (bilinear, the default;
``torchvision.transforms`` or ``transforms.v2``), it
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
    try:
        from torchvision.transforms import v2
    except ImportError:  # torchvision < 0.15
        v2 = None
    tf = ds.transform
    if type(tf) in (T.Compose, v2 and v2.Compose) and tf.transforms:
        first, rest = tf.transforms[0], list(tf.transforms[1:])
    else:
        first, rest = tf, []
    kinds = {T.RandomResizedCrop: _rrc_geometry, T.Resize: _resize_geometry}
    if v2 is not None:
        kinds.update({v2.RandomResizedCrop: _rrc_v2_geometry, v2.Resize: _resize_v2_geometry})
    kind = kinds.get(type(first))
    if kind is None:
        return None, "the transform does not start with RandomResizedCrop or Resize"
    interp = first.interpolation  # v2 may keep it as a string ("bilinear")
    if isinstance(interp, str) and not isinstance(interp, InterpolationMode):
        interp = InterpolationMode._value2member_map_.get(interp.lower())
    if interp != InterpolationMode.BILINEAR or first.antialias is False:
        return None, f"{type(first).__name__} is not bilinear with antialiasing"
    if any(m in vars(first) for m in ("get_params", "make_params", "forward", "transform")):
        return None, f"{type(first).__name__} with a method replaced on the instance"
    geometry = kind(first)
    v2_kind = v2 is not None and type(first) in (v2.RandomResizedCrop, v2.Resize)
    name = ("v2." if v2_kind else "") + type(first).__name__
    if geometry is None:
        return None, f"{name}: an unusual size, or no _compute_resized_output_size here"
    what = (f"{name}: exact JPEG crop-decode" if "Crop" in name
            else f"{name}: exact JPEG decode + resize")

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
        except (Error, ValueError, MemoryError):
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
    if len(rrc.size) != 2:
        return None
    get_params, scale, ratio = rrc.get_params, rrc.scale, rrc.ratio
    out = (int(rrc.size[1]), int(rrc.size[0]))
    one = torch.empty(())  # get_params only reads the shape of what it is given

    def geometry(w, h):
        top, left, ch, cw = get_params(one.expand(3, h, w), scale, ratio)
        return (left, top, cw, ch), out

    return geometry


def _rrc_v2_geometry(rrc):
    """As _rrc_geometry for transforms.v2.RandomResizedCrop: its own
    make_params, given one plain tensor of the image's shape (v2 reads the
    size of every image-like input; a lone PIL image gives the same)."""
    make = getattr(rrc, "make_params", None) or getattr(rrc, "_get_params", None)
    if make is None or len(rrc.size) != 2:
        return None
    out = (int(rrc.size[1]), int(rrc.size[0]))
    one = torch.empty(())

    def geometry(w, h):
        p = make([one.expand(3, h, w)])
        return (p["left"], p["top"], p["width"], p["height"]), out

    return geometry


def _resize_v2_geometry(resize):
    """(w, h) -> (None, output) as transforms.v2's PIL resize kernel computes it."""
    try:
        from torchvision.transforms.v2.functional._geometry import _compute_resized_output_size
    except ImportError:
        return None
    size, max_size = resize.size, resize.max_size

    def geometry(w, h):
        oh, ow = _compute_resized_output_size((h, w), size=size, max_size=max_size)
        return None, (int(ow), int(oh))

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
