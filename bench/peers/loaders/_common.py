"""Shared harness of the peer-loader workers (bench/peers/loaders/NAME.py).

Each worker is started by bench/peers/run in its own process, builds one
loader doing the suite's work on an ImageFolder tree

    decode -> RandomResizedCrop(size, scale=(0.08, 1), ratio=(3/4, 4/3))
    -> random horizontal flip -> uint8 CHW, or float32 CHW normalised by
    the ImageNet mean/std -> batches of --batch with int labels,

streams --epochs epochs through `measure()` and prints ONE JSON line on
stdout (the last line), then exits.  A worker prints "#ready" on stdout
once its imports are done, so that the parent can note the memory of the
bare framework (import_pss_mb) apart from the loader's peak.

What `measure()` times (wall clock, time.perf_counter):
  * t0 = just before the loader is built (imports and dataset listing by
    this harness excluded; the loader's own scan / graph building / JIT /
    worker start-up included);
  * first_batch_s = t0 -> first batch of the first epoch in hand;
  * img_s (the headline) = images after the first batch / time from the
    first batch to the last batch of the last epoch: steady throughput,
    epoch boundaries included (start-up is what first_batch_s measures);
    img_s_total = all images / (t0 -> last batch);
  * epoch_img_s = per epoch, its images / (its first next() -> its last
    batch; epoch 1 from t0), for storage where epochs differ (a cold
    remote first epoch, a cache filled by it);
  * with --step-ms T the consumer holds every batch T ms (time.sleep, as a
    training step would); stall_fraction = time spent waiting for batches
    / (t0 -> last batch), else null;
  * CPU = user+sys of the whole process tree: this process and its reaped
    children (getrusage) plus live descendants (/proc/PID/stat), read at t0,
    at the first batch and at the end after the loader is closed (worker
    processes joined).  cpu_s_per_img is (end - first batch) / images after
    the first batch; cpu_s_per_img_total is (end - t0) / all images.
Checks: every batch's dtype and shape (N x 3 x size x size, N <= batch);
per epoch, the histogram of labels delivered must equal the dataset's
(every image exactly once).  Failures are reported in the JSON ("errors")
and make the parent flag the loader loudly.
"""
import argparse
import json
import os
import resource
import sys
import time
import traceback

IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)
SCALE = (0.08, 1.0)
RATIO = (3.0 / 4.0, 4.0 / 3.0)
EXTS = (".jpg", ".jpeg", ".png")


def parse_args(argv=None, extra=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", required=True)
    ap.add_argument("--out", choices=["uint8", "float"], default="uint8")
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--size", type=int, default=224)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--epochs", type=int, default=1)
    ap.add_argument("--step-ms", type=float, default=0.0)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--workdir", default="/tmp/sluice-peers",
                    help="scratch space (ffcv's .beton)")
    ap.add_argument("--opt", action="append", default=[],
                    help="loader-specific KEY=VALUE (e.g. workers=3)")
    if extra:
        extra(ap)
    a = ap.parse_args(argv)
    a.opts = dict(kv.split("=", 1) for kv in a.opt)
    return a


def torchvision_transform(a):
    """The suite's work as torchvision transforms (torch, torchdata and
    webdataset workers): RandomResizedCrop(a.size) + RandomHorizontalFlip, then
    PILToTensor (a.out uint8) or ToTensor + Normalize (float)."""
    from torchvision import transforms as T
    if a.out == "uint8":
        return T.Compose([T.RandomResizedCrop(a.size), T.RandomHorizontalFlip(), T.PILToTensor()])
    return T.Compose([T.RandomResizedCrop(a.size), T.RandomHorizontalFlip(), T.ToTensor(),
                      T.Normalize(IMAGENET_MEAN, IMAGENET_STD)])


def torch_batch(b):
    """(dtype, shape, labels) of a torch (images, labels) batch: the
    to_numpy of every torch-based worker."""
    x, y = b
    return str(x.dtype).replace("torch.", ""), tuple(x.shape), y.numpy()


def close_dataloader(L):
    """Shut a torch DataLoader's persistent workers down (joined, so their
    CPU is counted)."""
    it = getattr(L, "_iterator", None)
    if it is not None and hasattr(it, "_shutdown_workers"):
        it._shutdown_workers()
    L._iterator = None


def start_ray(num_cpus):
    """A Ray cluster of this worker's own (address="local"), num_cpus = the
    preparers it may run at once; its processes (GCS, raylet, Ray's
    workers) are descendants of this one, so the process-tree CPU and PSS
    include them; Ray kills no idle worker (a killed worker's CPU would
    leave the tree uncounted: Ray does not reap into its parent's
    children's times), so the loader is closed after the measurement
    (measure_ray). Ray's workers import the sluice package through
    PYTHONPATH (bench/peers/run puts the build's python/ there)."""
    import ray
    ray.init(address="local", num_cpus=num_cpus, include_dashboard=False,
             log_to_driver=False, _node_ip_address="127.0.0.1",
             object_store_memory=2 << 30,
             _system_config={"kill_idle_workers_interval_ms": 0})
    return ray


def measure_ray(args, build, epoch_iter, to_numpy, close=None, **kw):
    """measure() for a loader whose work runs in Ray's processes: the
    loader stays open (its processes alive, their CPU in the tree) until the
    end's CPU is read, then close(loader)."""
    held = []
    res = measure(args, lambda: held.append(build()) or held[0], epoch_iter, to_numpy, **kw)
    if close is not None:
        close(held[0])
    return res


def ready():
    """Tell the parent the imports are done (it samples memory then)."""
    print("#ready", flush=True)


def list_imagefolder(root):
    """(classes, [(path, label)]) as torchvision's ImageFolder: classes are the
    sorted sub-folder names, files are walked recursively and sorted."""
    classes = sorted(e.name for e in os.scandir(root) if e.is_dir())
    samples = []
    for i, c in enumerate(classes):
        for dirpath, _dirs, names in sorted(os.walk(os.path.join(root, c), followlinks=True)):
            for n in sorted(names):
                if n.lower().endswith(EXTS):
                    samples.append((os.path.join(dirpath, n), i))
    return classes, samples


_TICK = os.sysconf("SC_CLK_TCK")


def _stat_cpu(pid):
    """(utime+stime, cutime+cstime) of pid in seconds, from /proc/PID/stat."""
    with open(f"/proc/{pid}/stat") as f:
        s = f.read()
    fields = s[s.rindex(")") + 2:].split()
    # fields[0] is state (field 3); utime..cstime are fields 14..17
    return ((int(fields[11]) + int(fields[12])) / _TICK, (int(fields[13]) + int(fields[14])) / _TICK)


def tree_pids(root):
    """root and every process below it (from /proc/*/stat parent links);
    bench/peers/run.py samples the workers' PSS with it too."""
    kids = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{d}/stat") as f:
                    s = f.read()
                # pid (comm) state ppid ...: comm may hold spaces and parentheses
                kids.setdefault(int(s[s.rindex(")") + 2:].split()[1]), []).append(int(d))
            except (OSError, ValueError, IndexError):
                pass
    out, stack = [], [root]
    while stack:
        p = stack.pop()
        out.append(p)
        stack.extend(kids.get(p, []))
    return out


def tree_cpu(exclude=()):
    """CPU seconds (user+sys) of this process tree: this process (getrusage),
    its reaped children (getrusage CHILDREN), and the live descendants
    (/proc/PID/stat, with their own reaped children) but those in exclude
    (bench/gpu/train.py's CPU hog)."""
    s = resource.getrusage(resource.RUSAGE_SELF)
    c = resource.getrusage(resource.RUSAGE_CHILDREN)
    total = s.ru_utime + s.ru_stime + c.ru_utime + c.ru_stime
    for pid in tree_pids(os.getpid())[1:]:
        if pid in exclude:
            continue
        try:
            own, reaped = _stat_cpu(pid)
            total += own + reaped
        except (OSError, ValueError, IndexError):
            pass
    return total


def emit(obj):
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def measure(args, build, epoch_iter, to_numpy, close=None, version="", config="",
            extra=None):
    """Run the timed loop and print the result line.

    build()            -> loader (timed: inside the window)
    epoch_iter(L, e)   -> iterable of batches for epoch e
    to_numpy(batch)    -> (dtype_str, shape_tuple, labels as a 1-D numpy int array)
    close(L)           -> shut the loader down (worker processes joined)
    """
    import numpy as np

    _classes, samples = list_imagefolder(args.data)
    ncls = max((lab for _p, lab in samples), default=-1) + 1
    want_hist = np.bincount(np.array([lab for _p, lab in samples], dtype=np.int64), minlength=ncls)
    want_dtype = "uint8" if args.out == "uint8" else "float32"
    errors = []
    step = args.step_ms / 1000.0

    cpu0 = tree_cpu()
    t0 = time.perf_counter()
    loader = build()
    first = None
    first_n = -1
    cpu_first = t_first = None
    images = 0
    batches = 0
    wait = 0.0
    epoch_s = []  # per epoch: its first next() (epoch 0: t0) -> its last batch
    for e in range(args.epochs):
        hist = np.zeros(ncls, dtype=np.int64)
        te = t0 if e == 0 else time.perf_counter()
        it = iter(epoch_iter(loader, e))
        while True:
            tw = time.perf_counter()
            try:
                b = next(it)
            except StopIteration:
                break
            dtype, shape, labels = to_numpy(b)
            now = time.perf_counter()
            wait += now - tw
            if first is None:
                first = now - t0
                cpu_first = tree_cpu()
                first_n = None  # set below, once n is known
            n = len(labels)
            if dtype != want_dtype:
                errors.append(f"epoch {e} batch {batches}: dtype {dtype}, want {want_dtype}")
            if (len(shape) != 4 or tuple(shape[1:]) != (3, args.size, args.size)
                    or shape[0] != n or not 0 < n <= args.batch):
                errors.append(f"epoch {e} batch {batches}: shape {tuple(shape)} with {n} labels")
            labels = np.asarray(labels).astype(np.int64).ravel()
            if labels.size and (labels.min() < 0 or labels.max() >= ncls):
                errors.append(f"epoch {e} batch {batches}: label out of range")
                labels = labels[(labels >= 0) & (labels < ncls)]
            hist += np.bincount(labels, minlength=ncls)
            images += n
            batches += 1
            if first_n is None:
                first_n = n
                t_first = time.perf_counter()
            if step > 0:
                time.sleep(step)
        epoch_s.append((time.perf_counter() - te, int(hist.sum())))
        if not np.array_equal(hist, want_hist):
            diff = hist - want_hist
            errors.append(f"epoch {e}: {int(hist.sum())} images delivered, want {int(want_hist.sum())}; "
                          f"{int((diff > 0).sum())} classes over, {int((diff < 0).sum())} under")
        del it
    t_end = time.perf_counter()
    if close is not None:
        close(loader)
    del loader
    import gc
    gc.collect()
    cpu_end = tree_cpu()
    cpu_s = cpu_end - cpu0
    seconds = t_end - t0
    steady_n = images - max(first_n, 0)
    steady_s = (t_end - t_first) if t_first is not None else 0.0
    res = {
        "ok": not errors, "images": images, "batches": batches, "epochs": args.epochs,
        "dataset_images": len(samples), "seconds": seconds,
        # headline rate: after the first batch (start-up is first_batch_s)
        "img_s": steady_n / steady_s if steady_s > 0 else None,
        "img_s_total": images / seconds if seconds > 0 else None,
        "first_batch_s": first, "cpu_s": cpu_s,
        "cpu_s_per_img": (cpu_end - cpu_first) / steady_n if steady_n > 0 else None,
        "cpu_s_per_img_total": cpu_s / images if images else None,
        "stall_fraction": (wait / seconds) if step > 0 and seconds > 0 else None,
        "wait_s": wait, "version": version, "config": config,
        # per epoch, images / seconds (epoch 1 from t0: start-up included)
        "epoch_img_s": [n / t if t > 0 else None for t, n in epoch_s],
        "errors": errors[:20], "n_errors": len(errors),
    }
    if extra:
        res.update(extra)
    emit(res)
    return res


def main_guard(fn):
    """Run fn(); on any exception print {"error": ...} as the result line."""
    try:
        fn()
    except SystemExit:
        raise
    except BaseException as e:  # noqa: BLE001 - reported, not swallowed
        tb = traceback.format_exc()
        sys.stderr.write(tb)
        emit({"error": f"{type(e).__name__}: {e}"[:600], "traceback": tb[-2000:]})
        sys.exit(3)
