"""Training fed by sluice with the decode on the CPU or on the GPU stage
(issue 19), and by the peers (torch's DataLoader; torchvision's batched
nvJPEG decode), against the GPU-bound rate (synthetic batches already on
the GPU). Run by bench/gpu/run on a GPU machine (bench/gpu/README.md):

    python3 bench/gpu/train.py PHOTOS [--batch 64] [--steps 30]
        [--threads 2,4] [--models resnet50,resnet18] [--cases cpu,gpu,auto]
        [--hog-cores N --hog-at STEP] [--telemetry DIR] [--device cpu]

--hog-cores starts N busy processes at timed step --hog-at (a CPU hog
taking cores mid-run: the issue's `auto` target) and stops them after the
case; the rate is then also reported over the steps after the hog began.
--telemetry DIR keeps each case's sluice telemetry (JSON Lines) there for
`sluice plot`. --device cpu is a dry run without a GPU (over the simulated
CUDA runtime: tests/python/test_gpu_bench.py).

Prints one line per case and a JSON line ("train: {...}"): img/s, the
share of the bound, the step time, the time spent waiting for the loader
(share of wall time, and ms a step), the trainer's own time a step outside
next() and how much above the synthetic step it is (the stage's
interference), the CPU of the process tree per image
and as a share of the machine, and from NVML (where pynvml is present) the
mean SM and JPEG-engine utilisation and the GPU energy per image over the
timed steps."""
import argparse
import json
import os
import sys
import threading
import time

import numpy
import torch
import torchvision

import sluice.torch as st

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "peers", "loaders"))
import _common as C  # noqa: E402  (the peers' transform and CPU count)


def _spin():
    while True:
        pass


class Hog:
    """N busy processes, started and stopped on demand."""

    def __init__(self, n):
        self.n, self.procs = n, []

    def start(self):
        import multiprocessing as mp
        ctx = mp.get_context("spawn")
        self.procs = [ctx.Process(target=_spin, daemon=True) for _ in range(self.n)]
        for p in self.procs:
            p.start()

    def stop(self):
        for p in self.procs:
            p.terminate()
            p.join()
        self.procs = []


class Nvml:
    """Mean GPU and JPEG-engine utilisation (sampled every 50 ms) and the
    energy used between start() and stop(); None values without pynvml."""

    def __init__(self, on=True):
        self.nv = None  # off (a dry run on the CPU) or no NVML: no figures
        if not on:
            return
        try:
            import pynvml
            pynvml.nvmlInit()
            self.nv = pynvml
            self.h = self._handle(pynvml)
        except Exception:  # no NVML: the figures stay None
            self.nv = None

    @staticmethod
    def _handle(nv):
        """torch's GPU in NVML, by its PCI bus id (NVML's indices need not
        be CUDA's, e.g. under CUDA_VISIBLE_DEVICES); else NVML's GPU 0."""
        try:
            p = torch.cuda.get_device_properties(torch.cuda.current_device())
            return nv.nvmlDeviceGetHandleByPciBusId(
                f"{p.pci_domain_id:08x}:{p.pci_bus_id:02x}:{p.pci_device_id:02x}.0")
        except Exception:
            return nv.nvmlDeviceGetHandleByIndex(0)

    def start(self):
        self.samples, self.run = [], True
        if not self.nv:
            return
        self.e0 = self.nv.nvmlDeviceGetTotalEnergyConsumption(self.h)
        self.t = threading.Thread(target=self._loop, daemon=True)
        self.t.start()

    def _loop(self):
        while self.run:
            try:
                u = self.nv.nvmlDeviceGetUtilizationRates(self.h).gpu
                j = self.nv.nvmlDeviceGetJpgUtilization(self.h)[0]
            except Exception:
                u, j = None, None
            self.samples.append((u, j))
            time.sleep(0.05)

    def abort(self):
        """A case that failed: its sampling thread stopped, no figures."""
        self.run = False
        t = getattr(self, "t", None)
        if t is not None and t.is_alive():
            t.join()

    def stop(self, images):
        self.run = False
        if not self.nv:
            return {}
        self.t.join()
        e = self.nv.nvmlDeviceGetTotalEnergyConsumption(self.h) - self.e0
        sm = [u for u, _ in self.samples if u is not None]
        jp = [j for _, j in self.samples if j is not None]
        return {"sm_util": round(sum(sm) / len(sm), 1) if sm else None,
                "jpg_util": round(sum(jp) / len(jp), 1) if jp else None,
                "j_per_img": round(e / 1000 / images, 4) if images else None}


def _gpu_figures(d):
    return {k: d[k] for k in ("sm_util", "jpg_util", "j_per_img", "gpu_bytes",
                              "gpu_nvjpeg_bytes", "gpu_roi") if k in d}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("photos")
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--size", type=int, default=224,
                    help="RandomResizedCrop's output side (the tests' dry run: 64)")
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--threads", default="2,4")
    ap.add_argument("--models", default="resnet50",
                    help="torchvision model names (resnet50, resnet18, ...)")
    ap.add_argument("--cases", default="cpu,gpu",
                    help="cpu, gpu, gpu-dev (gpu with device_batches: CUDA "
                         "tensors over the stage's memory, no copy), auto "
                         "(the scheduler places: "
                         "sched/place.h; its last share and decisions "
                         "reported), gpu-default (nvJPEG's own allocations: "
                         "SL_GPU_NVJPEG_ALLOC=default), gpu-pageable (the "
                         "bitstreams not copied to pinned memory: "
                         "SL_GPU_PAGEABLE_BITS=1), gpu-whole (whole images "
                         "decoded, no ROI decode: SL_GPU_ROI=0), gpu-hybrid "
                         "(nvJPEG's default backend, not the hardware one: "
                         "SL_GPU_BACKEND=default), gpu-g32 (groups of at most "
                         "32: SL_GPU_GROUP=32), gpu-noprealloc (nvJPEG's "
                         "hardware buffers not preallocated at create: "
                         "SL_GPU_PREALLOC=0); the peers: "
                         "torch (ImageFolder + DataLoader, PIL in worker "
                         "processes), tv-gpu (torchvision's batched nvJPEG "
                         "decode, then per-image crop/resize/flip on the GPU; "
                         "workers read the files)")
    ap.add_argument("--device", default="cuda",
                    help="cpu: a dry run where there is no GPU (the script's "
                         "own test; the figures mean nothing)")
    ap.add_argument("--hog-cores", type=int, default=0)
    ap.add_argument("--hog-at", type=int, default=0,
                    help="timed step at which the hog starts")
    ap.add_argument("--telemetry", help="folder for each case's telemetry")
    a = ap.parse_args()
    for c in a.cases.split(","):
        if c not in CASES:
            ap.error(f"--cases: no case {c!r} (one of {', '.join(CASES)})")
    nvml = Nvml(on=a.device == "cuda")
    res = {}
    for m in a.models.split(","):
        res[m] = run_model(a, m, nvml)
    print("train: " + json.dumps(res), flush=True)


# Each case: the placement it asks sluice for and the variant's environment,
# or the peer it runs.
CASES = {"cpu": ("cpu", {}), "gpu": ("gpu", {}), "auto": ("auto", {}),
         "gpu-dev": ("gpu", {}),
         "gpu-default": ("gpu", {"SL_GPU_NVJPEG_ALLOC": "default"}),
         "gpu-pageable": ("gpu", {"SL_GPU_PAGEABLE_BITS": "1"}),
         "gpu-whole": ("gpu", {"SL_GPU_ROI": "0"}),
         "gpu-hybrid": ("gpu", {"SL_GPU_BACKEND": "default"}),
         "gpu-g32": ("gpu", {"SL_GPU_GROUP": "32"}),
         "gpu-noprealloc": ("gpu", {"SL_GPU_PREALLOC": "0"}),
         "torch": ("peer", {}), "tv-gpu": ("peer", {})}


class _Bytes(torch.utils.data.Dataset):
    """tv-gpu's dataset: each photo's file bytes and its label."""

    def __init__(self, samples):
        self.samples = samples

    def __len__(self):
        return len(self.samples)

    def __getitem__(self, i):
        path, label = self.samples[i]
        # numpy, not a tensor: a batch of tensors crosses to the main
        # process as one file descriptor each, and runs out of them
        return numpy.fromfile(path, dtype=numpy.uint8), label


def _bytes_collate(b):
    return [x for x, _ in b], torch.tensor([y for _, y in b])


class Peer:
    """A peer loader as the training loop sees sluice's: set_epoch, iter
    (each batch (images uint8 NCHW, labels)), stats."""

    def __init__(self, a, case, threads, dev):
        from torchvision.datasets import ImageFolder
        self.case, self.dev = case, dev
        kw = dict(batch_size=a.batch, shuffle=True, num_workers=threads,
                  persistent_workers=threads > 0, drop_last=True,
                  pin_memory=dev.type == "cuda")
        if case == "torch":  # the peers' suite's transform, written once
            tf = C.torchvision_transform(argparse.Namespace(size=a.size, out="uint8"))
            self.dl = torch.utils.data.DataLoader(
                ImageFolder(a.photos, transform=tf), **kw)
        else:
            from torchvision.transforms import v2
            self.rrc = v2.Compose([v2.RandomResizedCrop(a.size, antialias=True),
                                   v2.RandomHorizontalFlip()])
            kw["pin_memory"] = False  # a list of tensors: decode_jpeg copies
            self.dl = torch.utils.data.DataLoader(
                _Bytes(ImageFolder(a.photos).samples), collate_fn=_bytes_collate,
                **kw)

    def set_epoch(self, epoch):
        torch.manual_seed(epoch)

    def __iter__(self):
        if self.case == "torch":
            yield from self.dl
            return
        from torchvision.io import ImageReadMode, decode_jpeg
        for xs, y in self.dl:  # the decode is the loader's time: in next()
            xs = [torch.from_numpy(x) for x in xs]
            imgs = decode_jpeg(xs, device=self.dev, mode=ImageReadMode.RGB)
            yield torch.stack([self.rrc(i) for i in imgs]), y

    def stats(self):
        return {}

    def close(self):
        C.close_dataloader(self.dl)


def run_model(a, name, nvml):
    dev = torch.device(a.device)

    def sync():
        if dev.type == "cuda":
            torch.cuda.synchronize()

    torch.backends.cudnn.benchmark = True
    model = getattr(torchvision.models, name)().to(dev)
    model = model.to(memory_format=torch.channels_last)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    mean = torch.tensor([0.485, 0.456, 0.406], device=dev).view(1, 3, 1, 1) * 255
    std = torch.tensor([0.229, 0.224, 0.225], device=dev).view(1, 3, 1, 1) * 255
    lossf = torch.nn.CrossEntropyLoss()

    def step(x, y):
        x = ((x.float() - mean) / std).contiguous(memory_format=torch.channels_last)
        with torch.autocast(dev.type, dtype=torch.bfloat16):
            loss = lossf(model(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    out = {"gpu": torch.cuda.get_device_name(0) if dev.type == "cuda" else None,
           "batch": a.batch, "model": name, "cores": os.cpu_count()}
    # The bound: batches already on the GPU.
    x = torch.randint(0, 256, (a.batch, 3, a.size, a.size), dtype=torch.uint8, device=dev)
    y = torch.randint(0, 1000, (a.batch,), device=dev)
    for _ in range(a.warmup):
        step(x, y)
    sync()
    nvml.start()
    t0 = time.perf_counter()
    for _ in range(a.steps):
        step(x, y)
    sync()
    bound = a.batch * a.steps / (time.perf_counter() - t0)
    out["bound"] = round(bound, 1)
    out["bound_step_ms"] = round(1000 * a.batch / bound, 2)
    out["bound_nvml"] = nvml.stop(a.batch * a.steps)
    print(f"GPU bound ({name}, batch {a.batch}): {bound:.0f} img/s "
          f"{out['bound_nvml']}", flush=True)

    for threads in [int(t) for t in a.threads.split(",")]:
        for case in a.cases.split(","):
            if case == "gpu-dev" and dev.type != "cuda":
                print(f"{name} {case}_t{threads}: skipped (device batches are "
                      "CUDA tensors: --device cuda only)", flush=True)
                continue
            key = f"{case}_t{threads}"
            for k in range(2, 100):  # a case run again: its own key
                if key not in out:
                    break
                key = f"{case}_t{threads}_{k}"
            try:
                r = out[key] = one_case(a, name, case, threads, dev, step,
                                        sync, nvml, bound)
            except Exception as e:  # one case failing loses no other
                nvml.abort()
                out[key] = {"error": f"{type(e).__name__}: {e}"}
                print(f"{name} {key}: failed: {out[key]['error']}", flush=True)
                continue
            print(f"{name} {key}: {r['img_s']:.0f} img/s = "
                  f"{r['of_bound']:.1%} of the bound, step {r['step_ms']} ms, "
                  f"waiting {r['wait']:.1%} ({r['wait_ms']} ms a step), "
                  f"own step {r['step_over_bound']:+.1%} on the synthetic one, "
                  f"{r['cpu_ms_img']} ms CPU/img {_gpu_figures(r)}", flush=True)
    return out


def one_case(a, name, case, threads, dev, step, sync, nvml, bound):
    """Makes the case's loader, trains on it (run_case), closes it."""
    place, env = CASES[case]
    if place == "peer":
        dl = Peer(a, case, threads, dev)
    else:
        extra = {"device_batches": True} if case == "gpu-dev" else {}
        if a.telemetry:
            os.makedirs(a.telemetry, exist_ok=True)
            extra["telemetry_path"] = os.path.join(
                a.telemetry, f"{name}_{case}_t{threads}.jsonl")
        os.environ.update(env)  # read when the stage is made
        try:
            dl = st.DataLoader(a.photos, batch_size=a.batch, num_workers=threads,
                               image_size=a.size,
                               device=a.device, pin_memory=dev.type == "cuda",
                               drop_last=True, placement=place,
                               max_threads=threads + 1, **extra)
        finally:
            for k in env:
                os.environ.pop(k, None)
    try:
        return run_case(a, dl, step, dev, sync, nvml, bound, place)
    finally:  # its threads or worker processes gone before the next case
        dl.close()
        del dl


def run_case(a, dl, step, dev, sync, nvml, bound, place):
    """Trains a.warmup + a.steps steps on dl's batches: the timed steps'
    figures (and the hog's, with --hog-cores). The hog's processes end with
    the case, whatever happens in it."""
    hog = Hog(a.hog_cores) if a.hog_cores else None
    try:
        return _train(a, dl, step, dev, sync, nvml, bound, place, hog)
    finally:
        if hog:
            hog.stop()


def _train(a, dl, step, dev, sync, nvml, bound, place, hog):
    hogs = ()
    th = nh = tl = nl = None
    late = a.warmup + a.hog_at + (a.steps - a.hog_at) // 2
    n = wait = 0.0
    t0 = c0 = None
    steps = epoch = 0
    while steps < a.warmup + a.steps:
        dl.set_epoch(epoch)
        epoch += 1
        it = iter(dl)
        while steps < a.warmup + a.steps:
            w0 = time.perf_counter()
            try:
                xb, yb = next(it)
            except StopIteration:
                break
            if steps == a.warmup:
                sync()
                nvml.start()
                t0, c0, wait, n = time.perf_counter(), C.tree_cpu(), 0.0, 0
                w0 = t0
            if t0 is not None:
                wait += time.perf_counter() - w0
            if hog and steps == a.warmup + a.hog_at:
                sync()
                hog.start()
                hogs = {p.pid for p in hog.procs}
                th, nh = time.perf_counter(), n
            if hog and steps == late:  # the second half after the hog
                tl, nl = time.perf_counter(), n
            step(xb.to(dev, non_blocking=True), yb.to(dev, non_blocking=True))
            steps += 1
            if t0 is not None:
                n += xb.shape[0]
    sync()
    secs = time.perf_counter() - t0
    cpu = C.tree_cpu(exclude=hogs) - c0  # the loader's and the trainer's
    rate = n / secs
    r = {"img_s": round(rate, 1), "of_bound": round(rate / bound, 3),
         "step_ms": round(1000 * secs / a.steps, 2),
         "wait": round(wait / secs, 3),
         "wait_ms": round(1000 * wait / a.steps, 2),
         # the trainer's own time a step (outside next()) against the
         # synthetic step: the "step time <= 3 % above synthetic"
         "work_ms": round(1000 * (secs - wait) / a.steps, 2),
         "step_over_bound": round((secs - wait) / a.steps
                                  / (a.batch / bound) - 1, 3),
         "cpu_ms_img": round(1000 * cpu / n, 2),
         "cpu_util": round(cpu / secs / os.cpu_count(), 3),
         **nvml.stop(n)}
    if hog:
        hog.stop()
        if th is not None and n > nh:
            h = (n - nh) / (t0 + secs - th)
            r["hog"] = {"cores": a.hog_cores, "at_step": a.hog_at,
                        "img_s_after": round(h, 1),
                        "of_bound_after": round(h / bound, 3)}
            if tl is not None and n > nl:
                # the steady state: a deep batch buffer feeds the trainer
                # for seconds after the hog comes
                h = (n - nl) / (t0 + secs - tl)
                r["hog"].update({"img_s_late": round(h, 1),
                                 "of_bound_late": round(h / bound, 3)})
    if place == "peer":
        return r
    tel = (dl.stats() or {}).get("telemetry") or {}
    pl = tel.get("placement") or {}
    r["gpu_samples"] = pl.get("gpu_samples_total")
    if place != "cpu":
        # the stage's GPU memory (within gpu_memory_bytes, and nvJPEG's own
        # beside it) and its ROI decode
        for k in ("gpu_bytes", "gpu_nvjpeg_bytes", "gpu_roi",
                  "gpu_decoded_frac"):
            r[k] = pl.get(k)
        # what a GPU sample cost the CPU (hand-over and the stage's
        # threads): the placement rule's k is this over a CPU decode's ms
        c, g = pl.get("gpu_cpu_total_s"), pl.get("gpu_samples_total")
        r["gpu_cpu_ms"] = (round(1000 * c / g, 3) if c is not None and g
                           else None)
        # of it the decoders' hand-overs (the rest: the stage's threads)
        h = pl.get("gpu_handoff_total_s")
        r["gpu_handoff_ms"] = (round(1000 * h / g, 3) if h is not None and g
                               else None)
    if place == "auto":
        # where the scheduler left the share, and its decisions
        r["gpu_share"] = pl.get("gpu_share")
        r["placement_why"] = pl.get("why")
        r["decisions"] = tel.get("decisions_total")
    return r


if __name__ == "__main__":
    main()
