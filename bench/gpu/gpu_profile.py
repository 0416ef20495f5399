"""Where the GPU's time goes while sluice's GPU stage feeds a training loop:
torch.profiler (CUPTI: every kernel and CUDA call of the process, sluice's
and nvJPEG's too) over a few steps of ResNet-18 fed with placement="gpu".

    python3 bench/gpu/gpu_profile.py PHOTOS [--threads 2] [--steps 20]

Prints the kernels by GPU time and the CUDA calls that synchronise or
allocate (cudaFree, cudaFreeHost, cudaMalloc*, *Synchronize) by count."""
import argparse

import torch
import torchvision
from torch.profiler import ProfilerActivity, profile

import sluice.torch as st


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("photos")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--batch", type=int, default=64)
    a = ap.parse_args()
    dev = torch.device("cuda")
    model = torchvision.models.resnet18().to(dev).to(memory_format=torch.channels_last)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    lossf = torch.nn.CrossEntropyLoss()
    dl = st.DataLoader(a.photos, batch_size=a.batch, num_workers=a.threads,
                       device="cuda", pin_memory=True, drop_last=True,
                       placement="gpu", max_threads=a.threads + 1)

    def batches():
        e = 0
        while True:
            dl.set_epoch(e)
            e += 1
            yield from dl

    it = batches()

    def step():
        x, y = next(it)
        x = x.float().contiguous(memory_format=torch.channels_last)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = lossf(model(x), y.to(dev, non_blocking=True))
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    for _ in range(10):
        step()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for _ in range(a.steps):
            step()
        torch.cuda.synchronize()
    ka = prof.key_averages()
    print(ka.table(sort_by="self_cuda_time_total", row_limit=15, max_name_column_width=60))
    words = ("Free", "Malloc", "HostAlloc", "Synchronize", "MemcpyAsync", "Memcpy")
    print("CUDA calls that allocate, free or wait:")
    for e in sorted(ka, key=lambda e: -e.count):
        if e.key.startswith("cuda") and any(w in e.key for w in words):
            print(f"  {e.key}: {e.count} calls, {e.cpu_time_total / 1000:.1f} ms")


if __name__ == "__main__":
    main()
