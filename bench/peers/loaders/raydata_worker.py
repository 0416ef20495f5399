#!/usr/bin/env python3
"""Ray Data's own image pipeline, as its image-training guide writes it:
ray.data.read_images(the ImageFolder's files, mode="RGB",
include_paths=True, shuffle="files") -> map_batches(the suite's
torchvision transform per image: RandomResizedCrop + flip + uint8 CHW, the
label from the class folder, batch_format="numpy", num_cpus=1) ->
iter_batches(batch_size=--batch, numpy). A local Ray cluster of this
process's own with num_cpus = --threads (the preparers: Ray runs at most
that many read/map tasks at once, fused into one task where Ray fuses
them), started before the timed window.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _common as C  # noqa: E402


def main():
    a = C.parse_args()
    import numpy as np
    ray = C.start_ray(a.threads)
    import ray.data
    ctx = ray.data.DataContext.get_current()
    ctx.enable_progress_bars = False
    C.ready()
    classes, samples = C.list_imagefolder(a.data)
    index = {c: i for i, c in enumerate(classes)}
    root = os.path.abspath(a.data)

    def prepare(batch):
        # imported in Ray's worker process
        from PIL import Image
        tf = C.torchvision_transform(a)
        imgs = [tf(Image.fromarray(x)).numpy() for x in batch["image"]]
        labels = [index[os.path.relpath(p, root).split(os.sep)[0]] for p in batch["path"]]
        return {"image": np.stack(imgs), "label": np.array(labels, dtype=np.int64)}

    def build():
        ds = ray.data.read_images([p for p, _l in samples], mode="RGB", include_paths=True,
                                  shuffle="files")
        return ds.map_batches(prepare, batch_format="numpy", batch_size=a.batch, num_cpus=1)

    def to_numpy(b):
        x = b["image"]
        return str(x.dtype), tuple(x.shape), b["label"]

    cfg = (f"Ray Data: read_images(files, mode=RGB, include_paths, shuffle=files) -> "
           f"map_batches(torchvision RandomResizedCrop({a.size}) + RandomHorizontalFlip + "
           f"PILToTensor per image, batch_size={a.batch}, num_cpus=1) -> "
           f"iter_batches({a.batch}, numpy); ray.init(num_cpus={a.threads})")
    C.measure_ray(a, build, lambda ds, e: ds.iter_batches(batch_size=a.batch, batch_format="numpy"),
              to_numpy, version=f"ray {ray.__version__}", config=cfg)


if __name__ == "__main__":
    C.main_guard(main)
