#!/usr/bin/env python3
"""FFCV: the ImageFolder is written once into a .beton (untimed; its time is
reported as setup_s), then read by ffcv.loader.Loader as FFCV's ImageNet
example does: order RANDOM, num_workers = --threads, os_cache=True,
pipelines image: RandomResizedCropRGBImageDecoder((size, size)) (scale
(0.08, 1), ratio (3/4, 4/3); decode with libjpeg-turbo, crop, cv2.resize
INTER_AREA) -> RandomHorizontalFlip -> [NormalizeImage(mean, std, float32)]
-> ToTensor -> ToTorchImage (CHW shape, channels_last memory: FFCV's
default, no copy); label: IntDecoder -> ToTensor -> Squeeze.

The .beton keeps every image at its full resolution as JPEG
(RGBImageField(write_mode='jpg', jpeg_quality=90), no max_resolution), so
the loader decodes the same pixel counts as the others (a re-encode at
quality 90 of the originals; FFCV's own ImageNet recipe shrinks images to
<= 256-512 px at write time, which would be less work than the others do).
"""
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _common as C  # noqa: E402


def main():
    a = C.parse_args()
    import numpy as np
    import torch
    import ffcv
    from ffcv.fields import IntField, RGBImageField
    from ffcv.fields.decoders import IntDecoder, RandomResizedCropRGBImageDecoder
    from ffcv.loader import Loader, OrderOption
    from ffcv.transforms import NormalizeImage, RandomHorizontalFlip, Squeeze, ToTensor, ToTorchImage
    from ffcv.writer import DatasetWriter
    torch.set_num_threads(1)
    quality = int(a.opts.get("quality", 90))
    mode = a.opts.get("write_mode", "jpg")
    _classes, samples = C.list_imagefolder(a.data)
    os.makedirs(a.workdir, exist_ok=True)
    tag = f"{os.path.abspath(a.data)}|{len(samples)}|{mode}|{quality}".encode()
    import hashlib
    beton = os.path.join(a.workdir, f"ffcv-{hashlib.sha1(tag).hexdigest()[:12]}.beton")
    meta_path = beton + ".json"
    if not (os.path.exists(beton) and os.path.exists(meta_path)):
        from torchvision.datasets import ImageFolder
        t = time.perf_counter()
        w = DatasetWriter(beton + ".tmp", {"image": RGBImageField(write_mode=mode, jpeg_quality=quality),
                                           "label": IntField()}, num_workers=a.threads)
        w.from_indexed_dataset(ImageFolder(a.data))
        os.replace(beton + ".tmp", beton)
        with open(meta_path, "w") as f:
            json.dump({"setup_s": time.perf_counter() - t, "bytes": os.path.getsize(beton)}, f)
    with open(meta_path) as f:
        meta = json.load(f)
    C.ready()
    S = a.size
    img_pipe = [RandomResizedCropRGBImageDecoder((S, S)), RandomHorizontalFlip()]
    if a.out == "float":
        img_pipe.append(NormalizeImage(np.array(C.IMAGENET_MEAN) * 255, np.array(C.IMAGENET_STD) * 255,
                                       np.float32))
    img_pipe += [ToTensor(), ToTorchImage()]

    def build():
        return Loader(beton, batch_size=a.batch, num_workers=a.threads, order=OrderOption.RANDOM,
                      os_cache=True, drop_last=False, seed=a.seed,
                      pipelines={"image": img_pipe, "label": [IntDecoder(), ToTensor(), Squeeze()]})

    def to_numpy(b):
        x, y = b
        return str(x.dtype).replace("torch.", ""), tuple(x.shape), y.numpy().ravel()

    from importlib.metadata import version
    ver = version("ffcv")  # ffcv.__version__ says 0.0.3rc1 in the 1.0.2 wheel
    cfg = (f".beton RGBImageField(write_mode='{mode}', jpeg_quality={quality}, full resolution) "
           f"({meta['bytes'] / 1e6:.0f} MB); Loader(batch_size={a.batch}, num_workers={a.threads}, "
           f"order=RANDOM, os_cache=True): RandomResizedCropRGBImageDecoder -> RandomHorizontalFlip"
           f"{' -> NormalizeImage(float32)' if a.out == 'float' else ''} -> ToTensor -> ToTorchImage(channels_last)")
    C.measure(a, build, lambda L, e: L, to_numpy, version=f"ffcv {ver}", config=cfg,
              extra={"setup_s": meta["setup_s"],
                     "setup_note": f"writing the .beton ({meta['bytes'] / 1e6:.0f} MB), once, untimed"})


if __name__ == "__main__":
    C.main_guard(main)
