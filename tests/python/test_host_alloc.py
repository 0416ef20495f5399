"""Batch buffers from a caller's allocator (sluice.Loader(host_alloc=...)),
which sluice.torch uses for pin_memory=True: the engine's buffers are
page-locked CUDA host memory, so pinning needs no copy and a GPU copy is one
DMA. On the CPU the hook is exercised with counting ctypes allocators; the
CUDA tests run only where torch sees a GPU (skipped, with the reason, here)."""
import ctypes
import gc

import numpy as np
import pytest
from conftest import synthetic_folder

sluice = pytest.importorskip("sluice", reason="sluice module not built")

B, S = 8, 48


@pytest.fixture(scope="module")
def ds(tmp_path_factory):
    return synthetic_folder(tmp_path_factory, "ds", 40, 2)


ALLOC = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(ctypes.c_void_p),
                         ctypes.c_size_t, ctypes.c_uint)
FREE = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p)
libc = ctypes.CDLL(None)
libc.malloc.restype = ctypes.c_void_p
libc.malloc.argtypes = [ctypes.c_size_t]
libc.free.argtypes = [ctypes.c_void_p]


class Counting:
    """A cudaHostAlloc / cudaFreeHost look-alike over malloc that records
    every buffer (ctypes callbacks: the engine calls them from its threads)."""

    def __init__(self, fail=False):
        self.live, self.allocs, self.frees, self.fail = {}, 0, 0, fail
        self.alloc = ALLOC(self._alloc)
        self.free = FREE(self._free)

    def _alloc(self, pp, n, flags):
        if self.fail:
            return 2  # cudaErrorMemoryAllocation
        p = libc.malloc(n)
        pp[0] = p
        self.live[p] = n
        self.allocs += 1
        return 0

    def _free(self, p):
        assert p in self.live, "freed a buffer it did not allocate"
        del self.live[p]
        libc.free(p)
        self.frees += 1
        return 0

    def addresses(self):
        return (ctypes.cast(self.alloc, ctypes.c_void_p).value,
                ctypes.cast(self.free, ctypes.c_void_p).value)


def test_batches_live_in_the_callers_buffers(ds):
    a = Counting()
    ld = sluice.Loader(ds, B, S, threads=2, prefetch=3, epochs=2,
                       host_alloc=a.addresses())
    plain = [x.copy() for x, _ in sluice.Loader(ds, B, S, threads=2, epochs=2)]
    got = []
    for x, y in ld:
        p = x.__array_interface__["data"][0]
        assert p in a.live and x.nbytes <= a.live[p]  # zero copy, its buffer
        got.append(x.copy())
        del x, y
    assert 1 <= a.allocs <= 3  # a pool of at most prefetch buffers
    assert all(np.array_equal(u, v) for u, v in zip(got, plain)) and len(got) == len(plain)
    ld.close()
    del ld
    gc.collect()
    assert a.frees == a.allocs and not a.live  # every buffer back to its owner


def test_a_held_batch_keeps_its_buffer_after_close(ds):
    a = Counting()
    ld = sluice.Loader(ds, B, S, host_alloc=a.addresses())
    x, y = next(iter(ld))
    keep = x.copy()
    ld.close()
    del ld
    gc.collect()
    assert a.live, "the held batch's buffer must not be freed yet"
    assert np.array_equal(x, keep)
    del x, y
    gc.collect()
    assert not a.live and a.frees == a.allocs


def test_allocation_failure_is_an_error(ds):
    a = Counting(fail=True)
    ld = sluice.Loader(ds, B, S, host_alloc=a.addresses())
    with pytest.raises(MemoryError, match="batch buffer"):
        next(iter(ld))  # an error, not a wait for a buffer that never comes


SET_DEVICE = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_int)


def test_allocating_threads_set_the_device_first(ds):
    """With cudaSetDevice's address and a device (sluice.torch passes the
    trainer's), each engine thread sets that device before it allocates:
    a CUDA allocation on a thread that set none makes a context on GPU 0,
    in every DDP rank."""
    import threading
    current, seen = {}, []
    a = Counting()
    inner = a._alloc

    def alloc(pp, n, flags):
        seen.append(current.get(threading.get_ident()))
        return inner(pp, n, flags)

    def set_device(d):
        current[threading.get_ident()] = d
        return 0

    a.alloc, sd = ALLOC(alloc), SET_DEVICE(set_device)
    addr = lambda f: ctypes.cast(f, ctypes.c_void_p).value
    ld = sluice.Loader(ds, B, S, threads=2, prefetch=3,
                       host_alloc=(addr(a.alloc), addr(a.free), addr(sd), 1))
    assert sum(int(x.shape[0]) for x, _ in ld) == 40
    assert seen and all(d == 1 for d in seen), seen
    ld.close()
    with pytest.raises(ValueError):
        sluice.Loader(ds, B, S, host_alloc=(addr(a.alloc), addr(a.free),
                                            addr(sd), -1))


def test_bad_host_alloc_argument(ds):
    with pytest.raises(TypeError):
        sluice.Loader(ds, B, S, host_alloc=5)
    with pytest.raises(ValueError):
        sluice.Loader(ds, B, S, host_alloc=(0, 0))


def _cuda():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device: pinned-buffer and GPU copy tests need one")
    return torch


def test_pin_memory_is_zero_copy_page_locked(ds):
    torch = _cuda()
    import sluice.torch as st
    dl = st.DataLoader(source=ds, batch_size=B, image_size=S, pin_memory=True,
                       seed=3, num_workers=2)
    ref = st.DataLoader(source=ds, batch_size=B, image_size=S, seed=3,
                        num_workers=2)
    for (x, y), (rx, ry) in zip(dl, ref):
        assert x.is_pinned()
        assert torch.equal(x, rx) and torch.equal(y, ry)


def test_device_cuda_copies_are_exact(ds):
    torch = _cuda()
    import sluice.torch as st
    dl = st.DataLoader(source=ds, batch_size=B, image_size=S, pin_memory=True,
                       device="cuda", seed=4, prefetch=2, num_workers=2)
    ref = st.DataLoader(source=ds, batch_size=B, image_size=S, seed=4,
                        num_workers=2)
    n = 0
    for _ in range(3):  # epochs: buffers are reused while copies may be in flight
        for (x, y), (rx, ry) in zip(dl, ref):
            assert x.is_cuda and y.is_cuda
            torch.cuda.synchronize()
            assert torch.equal(x.cpu(), rx) and torch.equal(y.cpu(), ry)
            n += 1
    assert n == 3 * len(ref)
