#!/usr/bin/env python3
"""NVIDIA DALI, CPU only (device_id=None): fn.readers.file over the
ImageFolder (labels = sorted sub-folders, shuffle_after_epoch for exact
epochs, pad_last_batch + LastBatchPolicy.PARTIAL so each image comes once),
num_threads = --threads, DALIGenericIterator (PyTorch plugin).

  --opt fused=0 : fn.decoders.image(device="cpu") -> fn.random_resized_crop
  --opt fused=1 : fn.decoders.image_random_crop(device="cpu") (decodes only
                  the crop window, DALI's recommended ImageNet path) ->
                  fn.resize(size x size)
then fn.crop_mirror_normalize(mirror=coin_flip(0.5), output_layout CHW,
dtype uint8, or float with the ImageNet mean/std x 255).
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _common as C  # noqa: E402


def main():
    a = C.parse_args()
    import nvidia.dali as dali
    from nvidia.dali import fn, pipeline_def, types
    from nvidia.dali.plugin.pytorch import DALIGenericIterator, LastBatchPolicy
    import torch
    torch.set_num_threads(1)
    C.ready()
    fused = a.opts.get("fused", "0") == "1"
    S = a.size
    out_float = a.out == "float"

    @pipeline_def(batch_size=a.batch, num_threads=a.threads, device_id=None, seed=a.seed + 1,
                  prefetch_queue_depth=2)
    def pipe():
        jpegs, labels = fn.readers.file(file_root=a.data, shuffle_after_epoch=True, pad_last_batch=True,
                                        name="Reader")
        if fused:
            imgs = fn.decoders.image_random_crop(jpegs, device="cpu", output_type=types.RGB,
                                                 random_area=[0.08, 1.0], random_aspect_ratio=[3 / 4, 4 / 3],
                                                 num_attempts=10)
            imgs = fn.resize(imgs, resize_x=S, resize_y=S, interp_type=types.INTERP_LINEAR, antialias=True)
        else:
            imgs = fn.decoders.image(jpegs, device="cpu", output_type=types.RGB)
            imgs = fn.random_resized_crop(imgs, size=[S, S], random_area=[0.08, 1.0],
                                          random_aspect_ratio=[3 / 4, 4 / 3], num_attempts=10,
                                          interp_type=types.INTERP_LINEAR, antialias=True)
        kw = {}
        if out_float:
            kw = dict(dtype=types.FLOAT, mean=[m * 255 for m in C.IMAGENET_MEAN],
                      std=[s * 255 for s in C.IMAGENET_STD])
        else:
            kw = dict(dtype=types.UINT8)
        imgs = fn.crop_mirror_normalize(imgs, output_layout="CHW", mirror=fn.random.coin_flip(probability=0.5),
                                        **kw)
        return imgs, labels

    def build():
        p = pipe()
        p.build()
        return DALIGenericIterator([p], ["data", "label"], reader_name="Reader",
                                   last_batch_policy=LastBatchPolicy.PARTIAL, auto_reset=True)

    def to_numpy(b):
        x, y = b[0]["data"], b[0]["label"]
        return str(x.dtype).replace("torch.", ""), tuple(x.shape), y.numpy().ravel()

    cfg = (f"DALI CPU-only pipeline (device_id=None, num_threads={a.threads}, prefetch_queue_depth=2): "
           f"readers.file(shuffle_after_epoch, pad_last_batch) -> "
           + ("decoders.image_random_crop(cpu) -> resize(linear, antialias)" if fused else
              "decoders.image(cpu) -> random_resized_crop(linear, antialias)")
           + f" -> crop_mirror_normalize(CHW, {'float, ImageNet mean/std' if out_float else 'uint8'}, "
             f"mirror=coin_flip) ; DALIGenericIterator(PARTIAL)")
    C.measure(a, build, lambda L, e: L, to_numpy, version=f"nvidia-dali {dali.__version__}", config=cfg)


if __name__ == "__main__":
    C.main_guard(main)
