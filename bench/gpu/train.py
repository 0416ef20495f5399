"""ResNet-50 training fed by sluice with the decode on the CPU or on the GPU
stage (issue 19), against the GPU-bound rate (synthetic batches already on
the GPU). Run by bench/gpu/run on a GPU machine:

    python3 bench/gpu/train.py PHOTOS [--batch 64] [--steps 30]
        [--threads 2,4] [--models resnet50,resnet18] [--cases cpu,gpu,auto]
        [--hog-cores N --hog-at STEP] [--telemetry DIR]

--hog-cores starts N busy processes at timed step --hog-at (a CPU hog
taking cores mid-run: the issue's `auto` target) and stops them after the
case; the rate is then also reported over the steps after the hog began.
--telemetry DIR keeps each case's sluice telemetry (JSON Lines) there for
`sluice plot`.

Prints one line per case and a JSON line ("train: {...}"): img/s, the
share of the bound, the fraction of wall time spent waiting for the
loader, the process's CPU milliseconds per image, and from NVML (where
pynvml is present) the mean SM and JPEG-engine utilisation and the GPU
energy per image over the timed steps."""
import argparse
import json
import os
import resource
import threading
import time

import torch
import torchvision

import sluice.torch as st


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


def cpu_s():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


class Nvml:
    """Mean GPU and JPEG-engine utilisation (sampled every 50 ms) and the
    energy used between start() and stop(); None values without pynvml."""

    def __init__(self):
        try:
            import pynvml
            pynvml.nvmlInit()
            self.nv = pynvml
            self.h = pynvml.nvmlDeviceGetHandleByIndex(0)
        except Exception:  # no NVML: the figures stay None
            self.nv = None

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
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--threads", default="2,4")
    ap.add_argument("--models", default="resnet50")
    ap.add_argument("--cases", default="cpu,gpu",
                    help="cpu, gpu, gpu-dev (gpu with device_batches: CUDA "
                         "tensors over the stage's memory, no copy), auto "
                         "(the scheduler places: "
                         "sched/place.h; its last share and decisions "
                         "reported), gpu-default (nvJPEG's own allocations: "
                         "SL_GPU_NVJPEG_ALLOC=default), gpu-pageable (the "
                         "bitstreams not copied to pinned memory: "
                         "SL_GPU_PAGEABLE_BITS=1), gpu-whole (whole images "
                         "decoded, no ROI decode: SL_GPU_ROI=0)")
    ap.add_argument("--hog-cores", type=int, default=0)
    ap.add_argument("--hog-at", type=int, default=0,
                    help="timed step at which the hog starts")
    ap.add_argument("--telemetry", help="folder for each case's telemetry")
    a = ap.parse_args()
    nvml = Nvml()
    res = {}
    for m in a.models.split(","):
        res[m] = run_model(a, m, nvml)
    print("train: " + json.dumps(res), flush=True)


def run_model(a, name, nvml):
    dev = torch.device("cuda")
    torch.backends.cudnn.benchmark = True
    model = getattr(torchvision.models, name)().to(dev)
    model = model.to(memory_format=torch.channels_last)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    mean = torch.tensor([0.485, 0.456, 0.406], device=dev).view(1, 3, 1, 1) * 255
    std = torch.tensor([0.229, 0.224, 0.225], device=dev).view(1, 3, 1, 1) * 255
    lossf = torch.nn.CrossEntropyLoss()

    def step(x, y):
        x = ((x.float() - mean) / std).contiguous(memory_format=torch.channels_last)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = lossf(model(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    out = {"gpu": torch.cuda.get_device_name(0), "batch": a.batch,
           "model": name, "cores": os.cpu_count()}
    # The bound: batches already on the GPU.
    x = torch.randint(0, 256, (a.batch, 3, 224, 224), dtype=torch.uint8, device=dev)
    y = torch.randint(0, 1000, (a.batch,), device=dev)
    for _ in range(a.warmup):
        step(x, y)
    torch.cuda.synchronize()
    nvml.start()
    t0 = time.perf_counter()
    for _ in range(a.steps):
        step(x, y)
    torch.cuda.synchronize()
    bound = a.batch * a.steps / (time.perf_counter() - t0)
    out["bound"] = round(bound, 1)
    out["bound_nvml"] = nvml.stop(a.batch * a.steps)
    print(f"GPU bound ({name}, batch {a.batch}): {bound:.0f} img/s "
          f"{out['bound_nvml']}", flush=True)

    for threads in [int(t) for t in a.threads.split(",")]:
        for case in a.cases.split(","):
            place = case.split("-")[0]
            if case == "gpu-default":
                os.environ["SL_GPU_NVJPEG_ALLOC"] = "default"
            if case == "gpu-pageable":
                os.environ["SL_GPU_PAGEABLE_BITS"] = "1"
            if case == "gpu-whole":
                os.environ["SL_GPU_ROI"] = "0"
            extra = {"device_batches": True} if case == "gpu-dev" else {}
            if a.telemetry:
                os.makedirs(a.telemetry, exist_ok=True)
                extra["telemetry_path"] = os.path.join(
                    a.telemetry, f"{name}_{case}_t{threads}.jsonl")
            dl = st.DataLoader(a.photos, batch_size=a.batch, num_workers=threads,
                               device="cuda", pin_memory=True, drop_last=True,
                               placement=place, max_threads=threads + 1, **extra)
            hog = Hog(a.hog_cores) if a.hog_cores else None
            th = nh = None
            os.environ.pop("SL_GPU_NVJPEG_ALLOC", None)
            os.environ.pop("SL_GPU_PAGEABLE_BITS", None)
            os.environ.pop("SL_GPU_ROI", None)
            n = wait = 0.0
            t0 = c0 = None
            steps = 0
            epoch = 0
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
                        torch.cuda.synchronize()
                        nvml.start()
                        t0, c0, wait, n = time.perf_counter(), cpu_s(), 0.0, 0
                        w0 = t0
                    if t0 is not None:
                        wait += time.perf_counter() - w0
                    if hog and steps == a.warmup + a.hog_at:
                        torch.cuda.synchronize()
                        hog.start()
                        th, nh = time.perf_counter(), n
                    step(xb, yb.to(dev, non_blocking=True))
                    steps += 1
                    if t0 is not None:
                        n += xb.shape[0]
            torch.cuda.synchronize()
            secs = time.perf_counter() - t0
            rate = n / secs
            key = f"{case}_t{threads}"
            out[key] = {"img_s": round(rate, 1), "of_bound": round(rate / bound, 3),
                        "wait": round(wait / secs, 3),
                        "cpu_ms_img": round(1000 * (cpu_s() - c0) / n, 2),
                        **nvml.stop(n)}
            if hog:
                hog.stop()
                if th is not None and n > nh:
                    r = (n - nh) / (time.perf_counter() - th)
                    out[key]["hog"] = {"cores": a.hog_cores, "at_step": a.hog_at,
                                       "img_s_after": round(r, 1),
                                       "of_bound_after": round(r / bound, 3)}
            tel = (dl.stats() or {}).get("telemetry") or {}
            pl = tel.get("placement") or {}
            if place != "cpu":
                # the stage's GPU memory (within gpu_memory_bytes, and
                # nvJPEG's own beside it) and its ROI decode
                for k in ("gpu_bytes", "gpu_nvjpeg_bytes", "gpu_roi",
                          "gpu_decoded_frac"):
                    out[key][k] = pl.get(k)
            if place == "auto":
                # where the scheduler left the share, and its decisions
                out[key]["gpu_share"] = pl.get("gpu_share")
                out[key]["placement_why"] = pl.get("why")
                out[key]["decisions"] = tel.get("decisions_total")
            print(f"{name} {key}: {rate:.0f} img/s = {rate / bound:.1%} of the "
                  f"bound, waiting {wait / secs:.1%}, {out[key]['cpu_ms_img']} "
                  f"ms CPU/img {_gpu_figures(out[key])}",
                  flush=True)
            del dl
    return out


if __name__ == "__main__":
    main()
