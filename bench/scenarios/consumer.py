#!/usr/bin/env python3
"""The Python consumer of the scenario benchmarks (bench/scenarios/run
starts it; not meant to be run by hand, though it can be):

    consumer.py --loader torch|sluice --data DIR --seed S --duration SEC
                [--step-ms T [--change-at K --change-step-ms T2]]
                [--trainer cnn --model-threads N]
                sluice: [--policy heuristic|static|rl] [--threads N]
                        [--read-threads N] [--prefetch N]
                torch:  --num-workers W

Loaders, same samples and ops (uint8 NCHW, RandomResizedCrop + flip):
  torch   torchvision ImageFolder + RandomResizedCrop(size) +
          RandomHorizontalFlip + PILToTensor, DataLoader(num_workers=W,
          shuffle=True, persistent_workers=True, prefetch_factor=2)
  sluice  sluice.torch.DataLoader(source=DIR, image_size=size, shuffle=True,
          seed=S, ...) as a user would write it.

Consumers: sleep(--step-ms) per batch (a training step of fixed length;
after --change-at batches it becomes --change-step-ms), or a real PyTorch
CPU training step (--trainer cnn: a small ResNet-style CNN, SGD, batches
converted to float and normalised in the step, torch.set_num_threads as a
user would: one per core unless --model-threads says otherwise).

Figures over the loop (after imports and model set-up): wait = time
blocked getting the next batch (the iterator's next(), and a new epoch's
iter()), stall_fraction = total wait / wall time, samples_per_s, and CPU
seconds of the whole process tree (getrusage SELF + CHILDREN after the
torch workers are shut down and reaped). Prints one JSON object last.
"""
import argparse
import json
import math
import os
import resource
import sys
import time


def cpu_now():
    s = resource.getrusage(resource.RUSAGE_SELF)
    c = resource.getrusage(resource.RUSAGE_CHILDREN)
    return s.ru_utime + s.ru_stime + c.ru_utime + c.ru_stime


def stall_timeline(intervals, t_end, bin_s=1.0):
    """Fraction of each bin_s bin spent waiting, from (start, end) pairs
    (seconds since the loop began)."""
    nb = max(1, int(math.ceil(t_end / bin_s)))
    bins = [0.0] * nb
    for a, b in intervals:
        k = int(a // bin_s)
        while a < b and k < nb:
            edge = min(b, (k + 1) * bin_s)
            bins[k] += edge - a
            a = edge
            k += 1
    return [round(min(1.0, x / bin_s), 4) for x in bins]


def make_trainer(torch, classes, threads):
    import torch.nn as nn

    torch.set_num_threads(threads)

    class Block(nn.Module):
        def __init__(self, cin, cout, stride):
            super().__init__()
            self.c1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
            self.b1 = nn.BatchNorm2d(cout)
            self.c2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
            self.b2 = nn.BatchNorm2d(cout)
            self.skip = None
            if stride != 1 or cin != cout:
                self.skip = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False),
                                          nn.BatchNorm2d(cout))

        def forward(self, x):
            y = torch.relu(self.b1(self.c1(x)))
            y = self.b2(self.c2(y))
            return torch.relu(y + (x if self.skip is None else self.skip(x)))

    model = nn.Sequential(
        nn.Conv2d(3, 16, 3, 2, 1, bias=False), nn.BatchNorm2d(16), nn.ReLU(),
        nn.MaxPool2d(3, 2, 1),
        Block(16, 16, 1), Block(16, 32, 2), Block(32, 64, 2),
        nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(64, classes))
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    mean = torch.tensor([0.485, 0.456, 0.406]).view(1, 3, 1, 1) * 255
    std = torch.tensor([0.229, 0.224, 0.225]).view(1, 3, 1, 1) * 255
    loss_fn = nn.CrossEntropyLoss()

    def step(x, y):
        x = (x.float() - mean) / std
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        return float(loss)

    return step


def torch_loader(torch, args):
    import torchvision
    from torchvision import transforms as T

    tf = T.Compose([T.RandomResizedCrop(args.size), T.RandomHorizontalFlip(),
                    T.PILToTensor()])
    ds = torchvision.datasets.ImageFolder(args.data, transform=tf)
    g = torch.Generator()
    g.manual_seed(args.seed)
    nw = args.num_workers
    return torch.utils.data.DataLoader(
        ds, batch_size=args.batch, shuffle=True, num_workers=nw, generator=g,
        persistent_workers=nw > 0, prefetch_factor=2 if nw > 0 else None,
        drop_last=False), len(ds.classes)


def sluice_loader(torch, args):
    import sluice
    import sluice.torch

    opts = {}
    if args.read_threads:
        opts["read_threads"] = args.read_threads
    if args.prefetch:
        opts["prefetch"] = args.prefetch
    if args.telemetry:
        opts["telemetry_path"] = args.telemetry
    if args.policy != "heuristic":
        opts["policy"] = args.policy
    try:
        dl = sluice.torch.DataLoader(source=args.data, batch_size=args.batch,
                                     image_size=args.size, shuffle=True,
                                     seed=args.seed, dtype=torch.uint8,
                                     num_workers=args.threads or None, **opts)
    except TypeError as e:
        sys.exit(f"consumer: this sluice Python package does not take "
                 f"{sorted(opts)} ({e}); policy {args.policy!r} needs "
                 "Loader(policy=...) in python/src")
    return dl, dl.loader.num_classes


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--loader", choices=("torch", "sluice"), required=True)
    ap.add_argument("--data", required=True)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--duration", type=float, required=True)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--size", type=int, default=224)
    ap.add_argument("--step-ms", type=float, default=0.0)
    ap.add_argument("--change-at", type=int, default=0)
    ap.add_argument("--change-step-ms", type=float, default=0.0)
    ap.add_argument("--trainer", choices=("none", "cnn"), default="none")
    ap.add_argument("--model-threads", type=int, default=0)
    ap.add_argument("--policy", default="heuristic")
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--read-threads", type=int, default=0)
    ap.add_argument("--prefetch", type=int, default=0)
    ap.add_argument("--num-workers", type=int, default=2)
    ap.add_argument("--telemetry")
    args = ap.parse_args()

    import torch

    torch.manual_seed(args.seed)
    if args.loader == "torch":
        dl, classes = torch_loader(torch, args)
    else:
        dl, classes = sluice_loader(torch, args)
    step = None
    if args.trainer == "cnn":
        step = make_trainer(torch, classes, args.model_threads or os.cpu_count())
    step_s = args.step_ms / 1000.0

    waits, intervals, samples, batches, steps_s = [], [], 0, 0, []
    cpu0 = cpu_now()
    t0 = time.perf_counter()
    it = iter(dl)
    done = False
    while not done:
        w0 = time.perf_counter()
        try:
            x, y = next(it)
        except StopIteration:  # a new epoch, as a training loop would
            it = iter(dl)
            x, y = next(it)
        w1 = time.perf_counter()
        waits.append(w1 - w0)
        intervals.append((w0 - t0, w1 - t0))
        if step is not None:
            step(x, y)
        elif step_s > 0:
            time.sleep(step_s)
        steps_s.append(time.perf_counter() - w1)
        samples += int(x.shape[0])
        batches += 1
        del x, y
        if args.change_at and batches == args.change_at:
            step_s = args.change_step_ms / 1000.0
        done = time.perf_counter() - t0 >= args.duration
    secs = time.perf_counter() - t0
    # Shut torch's workers down (they are reaped, so their CPU time is in
    # RUSAGE_CHILDREN) and stop sluice's threads before reading the clock.
    del it
    if hasattr(dl, "close"):
        dl.close()
    del dl
    import gc

    gc.collect()
    cpu = cpu_now() - cpu0
    ws = sorted(waits)
    p99 = ws[min(len(ws) - 1, max(0, math.ceil(0.99 * len(ws)) - 1))]
    res = {"loader": args.loader, "batches": batches, "samples": samples,
           "seconds": round(secs, 4),
           "mean_wait_ms": round(1000 * sum(waits) / len(waits), 3),
           "p99_wait_ms": round(1000 * p99, 3),
           "stall_fraction": round(sum(waits) / secs, 4),
           "samples_per_s": round(samples / secs, 2),
           "cpu_seconds": round(cpu, 3),
           "step_ms_mean": round(1000 * sum(steps_s) / len(steps_s), 3),
           "stall_timeline": stall_timeline(intervals, secs)}
    print(json.dumps(res))


if __name__ == "__main__":
    main()
