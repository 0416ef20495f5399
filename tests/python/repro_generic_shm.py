"""Issue 14 item 4, reproduced by hand (not collected by pytest): the
benchmark's generic-mode run (16 workers, batches of 256 x 3x224x224 uint8,
pin_memory) with /dev/shm smaller than the ring of 2 x prefetch x workers =
64 batch slots. Run in a private mount namespace with a small tmpfs:

    git show f6ffd44^:python/sluice/_generic.py > /tmp/generic_then.py
    unshare -m --propagation private sh -c 'mount -t tmpfs -o size=300M tmpfs /dev/shm &&
        .venv/bin/python tests/python/repro_generic_shm.py /tmp/generic_then.py'
    # -> RuntimeError: ... worker N (pid ...) was killed by signal SIGBUS
    # today's code (python/sluice/_generic.py): a RuntimeWarning naming
    # /dev/shm, then "BATCH FIGURES: 8192 samples ..."

argv[1]: the _generic.py to load."""
import importlib.util
import sys
import time

import torch

spec = importlib.util.spec_from_file_location("g", sys.argv[1])
g = importlib.util.module_from_spec(spec)
sys.modules["g"] = g
spec.loader.exec_module(g)


class DS(torch.utils.data.Dataset):
    def __len__(self):
        return 4096

    def __getitem__(self, i):
        return torch.full((3, 224, 224), i % 251, dtype=torch.uint8), i % 1000


ld = g.GenericLoader(DS(), batch_size=256, shuffle=True, seed=1, num_workers=16,
                     pin_memory=True, persistent_workers=True)
t0 = time.time()
n = 0
for ep in range(2):
    for x, y in ld:
        n += len(y)
print(f"BATCH FIGURES: {n} samples in {time.time() - t0:.1f} s", flush=True)
