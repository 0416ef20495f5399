"""ResNet-50 training fed by sluice with the decode on the CPU or on the GPU
stage (issue 19), against the GPU-bound rate (synthetic batches already on
the GPU). Run by bench/gpu/run on a GPU machine:

    python3 bench/gpu/train.py PHOTOS [--batch 64] [--steps 30] [--threads 2,4]

Prints one line per case and a JSON line ("train: {...}"): img/s, the
share of the bound, the fraction of wall time spent waiting for the
loader, and the process's CPU seconds per image."""
import argparse
import json
import os
import resource
import time

import torch
import torchvision

import sluice.torch as st


def cpu_s():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("photos")
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--threads", default="2,4")
    ap.add_argument("--model", default="resnet50")
    a = ap.parse_args()
    dev = torch.device("cuda")
    torch.backends.cudnn.benchmark = True
    model = getattr(torchvision.models, a.model)().to(dev)
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
           "model": a.model, "cores": os.cpu_count()}
    # The bound: batches already on the GPU.
    x = torch.randint(0, 256, (a.batch, 3, 224, 224), dtype=torch.uint8, device=dev)
    y = torch.randint(0, 1000, (a.batch,), device=dev)
    for _ in range(a.warmup):
        step(x, y)
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(a.steps):
        step(x, y)
    torch.cuda.synchronize()
    bound = a.batch * a.steps / (time.perf_counter() - t0)
    out["bound"] = round(bound, 1)
    print(f"GPU bound ({a.model}, batch {a.batch}): {bound:.0f} img/s", flush=True)

    for threads in [int(t) for t in a.threads.split(",")]:
        for place in ("cpu", "gpu"):
            dl = st.DataLoader(a.photos, batch_size=a.batch, num_workers=threads,
                               device="cuda", pin_memory=True, drop_last=True,
                               placement=place, max_threads=threads + 1)
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
                        t0, c0, wait, n = time.perf_counter(), cpu_s(), 0.0, 0
                        w0 = t0
                    if t0 is not None:
                        wait += time.perf_counter() - w0
                    step(xb, yb.to(dev, non_blocking=True))
                    steps += 1
                    if t0 is not None:
                        n += xb.shape[0]
            torch.cuda.synchronize()
            secs = time.perf_counter() - t0
            rate = n / secs
            key = f"{place}_t{threads}"
            out[key] = {"img_s": round(rate, 1), "of_bound": round(rate / bound, 3),
                        "wait": round(wait / secs, 3),
                        "cpu_ms_img": round(1000 * (cpu_s() - c0) / n, 2)}
            print(f"{key}: {rate:.0f} img/s = {rate / bound:.1%} of the bound, "
                  f"waiting {wait / secs:.1%}, {out[key]['cpu_ms_img']} ms CPU/img",
                  flush=True)
            del dl
    print("train: " + json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
