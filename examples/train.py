#!/usr/bin/env python3
"""Train a torchvision ResNet on an ImageFolder tree with either torch's
DataLoader or sluice's, and report how long the trainer waits for data.

    PYTHONPATH=build/python .venv/bin/python examples/train.py --loader sluice
    PYTHONPATH=build/python .venv/bin/python examples/train.py --loader torch --workers 2
    PYTHONPATH=build/python .venv/bin/python examples/train.py --loader sluice-generic --workers 2

Loaders (same ops on both sides, float32 NCHW, ImageNet mean/std):
  torch   torchvision ImageFolder + RandomResizedCrop(size)
          + RandomHorizontalFlip + ToTensor + Normalize, DataLoader(
          num_workers=W, shuffle=True, drop_last=True, persistent_workers=True)
  sluice  sluice.torch.DataLoader(source=DIR, image_size=size, shuffle=True,
          seed=0, dtype=torch.float32, drop_last=True, num_workers=W)
          (num_workers = decode threads in the C engine; 0/None = one per core)
  sluice-generic  torch's ImageFolder and transforms exactly as for torch,
          handed to sluice.torch.DataLoader(dataset=..., num_workers=W,
          shuffle=True, drop_last=True, persistent_workers=True, seed=0):
          the one-line swap (its fast path decodes the crop in C with
          PIL's pixels; the rest of the transform runs as written)

Threads: the model and the loader share the machine's cores.  The model's
intra-op pool is set with torch.set_num_threads(--model-threads), default
= number of cores (2 on the reference box), identically for both loaders, so
the only difference between runs is the loader.  Torch's DataLoader workers
run with 1 intra-op thread each (DataLoader's default).

Timing per step: "wait" is the time blocked in next(iterator) getting the
batch; "step" is wait + forward/backward/SGD update.  Epochs are iterated
until --steps steps.  The summary excludes the first --warmup steps (model
and loader warm-up, worker start-up) from the rates.  --json makes the last
stdout line a JSON object.
"""
import argparse
import json
import os
import statistics
import sys
import time

DEFAULT_DATA = "/work/shared/data/imagenet-sample"


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--loader", choices=("torch", "sluice", "sluice-generic"), required=True)
    p.add_argument("--data", default=DEFAULT_DATA)
    p.add_argument("--steps", type=int, default=50)
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--size", type=int, default=64,
                   help="image side; 64 gives ~0.5 s/step for ResNet-18 at "
                        "batch 32 on 2 cores (112 gives ~1.1 s)")
    p.add_argument("--workers", type=int, default=None,
                   help="torch, sluice-generic: worker processes (default 2); "
                        "sluice: decode threads (default: one per core)")
    p.add_argument("--arch", default="resnet18")
    p.add_argument("--model-threads", type=int, default=None,
                   help="torch.set_num_threads for the model (default: cores)")
    p.add_argument("--warmup", type=int, default=5,
                   help="steps excluded from the summary rates")
    p.add_argument("--lr", type=float, default=0.1)
    p.add_argument("--print-every", type=int, default=10)
    p.add_argument("--json", action="store_true")
    return p.parse_args()


def count_classes(root):
    return sum(1 for e in os.scandir(root) if e.is_dir())


def image_folder(args):
    import torchvision.transforms as T
    from torchvision.datasets import ImageFolder
    tf = T.Compose([
        T.RandomResizedCrop(args.size),
        T.RandomHorizontalFlip(),
        T.ToTensor(),
        T.Normalize(mean=[0.485, 0.456, 0.406], std=[0.229, 0.224, 0.225]),
    ])
    return ImageFolder(args.data, transform=tf)


def make_torch_loader(torch, args):
    ds = image_folder(args)
    w = 2 if args.workers is None else args.workers
    g = torch.Generator()
    g.manual_seed(0)
    return torch.utils.data.DataLoader(
        ds, batch_size=args.batch, shuffle=True, num_workers=w,
        drop_last=True, persistent_workers=w > 0, generator=g), w


def make_generic_loader(torch, args):
    import sluice.torch
    w = 2 if args.workers is None else args.workers
    return sluice.torch.DataLoader(
        image_folder(args), batch_size=args.batch, shuffle=True, num_workers=w,
        drop_last=True, persistent_workers=w > 0, seed=0), w


def make_sluice_loader(torch, args):
    import sluice.torch
    loader = sluice.torch.DataLoader(
        source=args.data, batch_size=args.batch, image_size=args.size,
        shuffle=True, seed=0, dtype=torch.float32, drop_last=True,
        num_workers=args.workers)
    return loader, (args.workers or os.cpu_count())


def main():
    args = parse_args()
    if not os.path.isdir(args.data):
        print(f"train.py: dataset {args.data!r} not found; skipping.\n"
              f"  Make a synthetic one with:  build/sluice make-dataset "
              f"--synthetic DIR   and pass --data DIR", file=sys.stderr)
        return 0
    import torch
    import torchvision

    cores = os.cpu_count() or 1
    model_threads = args.model_threads or cores
    torch.set_num_threads(model_threads)
    torch.manual_seed(0)
    classes = count_classes(args.data)

    make = {"torch": make_torch_loader, "sluice": make_sluice_loader,
            "sluice-generic": make_generic_loader}[args.loader]
    t_setup = time.perf_counter()
    loader, workers = make(torch, args)
    setup_s = time.perf_counter() - t_setup

    model = getattr(torchvision.models, args.arch)(num_classes=classes)
    model.train()
    opt = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9,
                          weight_decay=1e-4)
    loss_fn = torch.nn.CrossEntropyLoss()

    log = (lambda *a: print(*a, file=sys.stderr)) if args.json else print
    log(f"loader={args.loader} workers={workers} model_threads={model_threads} "
        f"arch={args.arch} classes={classes} batch={args.batch} "
        f"size={args.size} steps={args.steps} (setup {setup_s:.2f}s)")

    waits, steps_s, losses = [], [], []
    step = 0
    epoch = 0
    t_start = time.perf_counter()
    t_after_warm = None
    while step < args.steps:
        if hasattr(loader, "set_epoch") and args.loader != "torch":
            loader.set_epoch(epoch)
        it = iter(loader)
        while step < args.steps:
            t0 = time.perf_counter()
            try:
                images, labels = next(it)
            except StopIteration:
                break
            t1 = time.perf_counter()
            labels = labels.long()
            out = model(images)
            loss = loss_fn(out, labels)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            lv = loss.item()
            t2 = time.perf_counter()
            waits.append(t1 - t0)
            steps_s.append(t2 - t0)
            losses.append(lv)
            step += 1
            if step == args.warmup:
                t_after_warm = t2
            if step % args.print_every == 0 or step == args.steps:
                k = args.print_every
                log(f"step {step:5d}  epoch {epoch}  loss {lv:7.3f}  "
                    f"step {1e3 * statistics.mean(steps_s[-k:]):7.1f} ms  "
                    f"wait {1e3 * statistics.mean(waits[-k:]):7.1f} ms")
        epoch += 1
        del it
    t_end = time.perf_counter()
    if hasattr(loader, "close"):
        loader.close()

    if not steps_s:
        log("no steps ran (dataset smaller than one batch?)")
        return 1
    w0 = args.warmup if len(steps_s) > args.warmup else 0
    mw, ms = waits[w0:], steps_s[w0:]
    if w0 and t_after_warm is not None:
        span = t_end - t_after_warm
    else:
        span = t_end - t_start
    n = len(ms)
    samples_per_s = n * args.batch / span if span > 0 else 0.0
    mean_wait = statistics.mean(mw)
    mean_step = statistics.mean(ms)
    share = sum(mw) / sum(ms) if sum(ms) > 0 else 0.0
    all_rate = len(steps_s) * args.batch / (t_end - t_start)
    log(f"summary ({args.loader}, steps {w0 + 1}..{len(steps_s)}, "
        f"{epoch} epoch(s)): {samples_per_s:.1f} samples/s end-to-end "
        f"({all_rate:.1f} incl. warm-up), step {1e3 * mean_step:.1f} ms, "
        f"data wait {1e3 * mean_wait:.1f} ms/step = {100 * share:.1f}% of "
        f"step time, final loss {losses[-1]:.3f}")
    if args.json:
        print(json.dumps({
            "loader": args.loader, "steps": len(steps_s), "warmup": w0,
            "workers": workers, "model_threads": model_threads,
            "batch": args.batch, "size": args.size, "arch": args.arch,
            "samples_per_s": round(samples_per_s, 2),
            "samples_per_s_incl_warmup": round(all_rate, 2),
            "mean_wait_ms": round(1e3 * mean_wait, 3),
            "wait_share": round(share, 4),
            "step_ms": round(1e3 * mean_step, 3),
            "setup_s": round(setup_s, 3),
            "final_loss": round(losses[-1], 4),
        }))
    return 0


if __name__ == "__main__":
    sys.exit(main())
