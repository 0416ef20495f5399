#!/usr/bin/env python3
"""tf.data (tensorflow-cpu), as TF's input-pipeline guide advises for
throughput: from_tensor_slices(files, labels) -> shuffle(whole dataset,
reshuffle_each_iteration) -> map(load, num_parallel_calls=AUTOTUNE,
deterministic=False) -> batch -> prefetch(AUTOTUNE); the private thread pool
= --threads.  load(): read_file -> extract_jpeg_shape ->
sample_distorted_bounding_box(area (0.08, 1), aspect (3/4, 4/3), 10
attempts, whole image as fallback) -> decode_and_crop_jpeg (TF's fused
decode of the crop window only) -> resize(size x size, bilinear,
antialias=True: Pillow's filter, as torchvision) -> random_flip_left_right
-> uint8 (rounded) or float (/255, ImageNet mean/std) -> CHW transpose.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _common as C  # noqa: E402


def pipeline(tf, a, threads):
    """The suite's work as a tf.data pipeline over --data (no prefetch):
    from_tensor_slices(files, labels) -> shuffle -> map(load) -> batch, on a
    private thread pool of `threads`. tfdata_worker adds prefetch; the
    tf.data service worker (tfservice_worker.py) distributes it."""
    antialias = a.opts.get("antialias", "1") == "1"
    S = a.size
    mean = tf.constant(C.IMAGENET_MEAN, tf.float32)
    std = tf.constant(C.IMAGENET_STD, tf.float32)

    def load(path, label):
        data = tf.io.read_file(path)
        shape = tf.io.extract_jpeg_shape(data)
        bbox = tf.constant([0.0, 0.0, 1.0, 1.0], dtype=tf.float32, shape=[1, 1, 4])
        begin, size, _ = tf.image.sample_distorted_bounding_box(
            shape, bounding_boxes=bbox, min_object_covered=0.0, aspect_ratio_range=(3 / 4, 4 / 3),
            area_range=(0.08, 1.0), max_attempts=10, use_image_if_no_bounding_boxes=True)
        oy, ox, _ = tf.unstack(begin)
        h, w, _ = tf.unstack(size)
        img = tf.image.decode_and_crop_jpeg(data, tf.stack([oy, ox, h, w]), channels=3)
        img = tf.image.resize(img, [S, S], method="bilinear", antialias=antialias)
        img = tf.image.random_flip_left_right(img)
        if a.out == "uint8":
            img = tf.cast(tf.clip_by_value(tf.round(img), 0.0, 255.0), tf.uint8)
        else:
            img = (img / 255.0 - mean) / std
        return tf.transpose(img, [2, 0, 1]), label

    _classes, samples = C.list_imagefolder(a.data)
    files = [p for p, _l in samples]
    labels = [lab for _p, lab in samples]
    ds = tf.data.Dataset.from_tensor_slices((files, labels))
    ds = ds.shuffle(len(files), seed=a.seed, reshuffle_each_iteration=True)
    ds = ds.map(load, num_parallel_calls=tf.data.AUTOTUNE, deterministic=False)
    ds = ds.batch(a.batch)
    opt = tf.data.Options()
    opt.threading.private_threadpool_size = threads
    opt.autotune.enabled = True
    return ds.with_options(opt)


def pipeline_config(a, threads):
    antialias = a.opts.get("antialias", "1") == "1"
    return (f"from_tensor_slices -> shuffle(all, reshuffle) -> map(read_file, "
            f"sample_distorted_bounding_box, decode_and_crop_jpeg, resize(bilinear, antialias={antialias}), "
            f"random_flip_left_right, {'uint8' if a.out == 'uint8' else 'normalize'}, CHW; AUTOTUNE, "
            f"deterministic=False) -> batch({a.batch}); private_threadpool_size={threads}")


def to_numpy(b):
    x, y = b
    return x.dtype.name, tuple(x.shape), y.numpy()


def main():
    a = C.parse_args()
    import tensorflow as tf
    C.ready()
    tf.random.set_seed(a.seed)
    tf.config.threading.set_inter_op_parallelism_threads(a.threads)
    tf.config.threading.set_intra_op_parallelism_threads(1)

    def build():
        return pipeline(tf, a, a.threads).prefetch(tf.data.AUTOTUNE)

    cfg = f"tf.data: {pipeline_config(a, a.threads)} -> prefetch(AUTOTUNE)"
    C.measure(a, build, lambda L, e: L, to_numpy, version=f"tensorflow-cpu {tf.__version__}", config=cfg)


if __name__ == "__main__":
    C.main_guard(main)
