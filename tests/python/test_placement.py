"""sluice.Loader(placement=..., gpu_share=...): where samples are decoded
(docs/DESIGN.md, "GPU stage"). Without a GPU stage (this build has none,
and no machine here has a GPU): gpu fails at creation naming why, auto
runs on the CPU and says why in telemetry, the share knob stays 0."""
import os
import re
import sys

import pytest
from conftest import synthetic_folder

from conftest import PYDIR  # noqa: E402  (this build's package)
sluice = pytest.importorskip("sluice", reason="sluice module not built")

# Why a machine without a usable GPU stage has none: a build without the
# kernels (no nvcc), or one with them and no CUDA runtime or device.
NO_STAGE = (r"placement gpu: no GPU stage: (the GPU stage is not in this "
            r"build|no NVIDIA GPU driver on this machine \(/dev/nvidiactl is "
            r"absent\); and no lib(cudart|nvjpeg)\.so\.1[23] found|"
            r"no lib(cudart|nvjpeg)\.so\.1[23] found|no CUDA device)")


@pytest.fixture(scope="module")
def ds(tmp_path_factory):
    return synthetic_folder(tmp_path_factory, "ds", 24, 2)


def test_gpu_without_a_stage_names_why(ds):
    try:
        sluice.Loader(ds, 8, 32, placement="gpu")
    except Exception as e:
        assert re.search(NO_STAGE, str(e)), str(e)
    else:
        pytest.skip("a GPU stage runs here (bench/gpu/ and tests/gpu/ cover it)")


def test_auto_and_cpu_run_on_the_cpu(ds):
    a = sluice.Loader(ds, 8, 32, telemetry_ms=1, epochs=2)
    assert a.options["placement"] == "auto"
    assert sum(int(x.shape[0]) for x, _ in a) == 48
    p = a.stats()["telemetry"]["placement"]
    assert p["asked"] == "auto" and p["gpu"] == 0 and p["gpu_share"] == 0
    assert "auto: no GPU seen" in p["why"]
    c = sluice.Loader(ds, 8, 32, placement="cpu", telemetry_ms=1, epochs=2)
    assert c.options["placement"] == "cpu"
    assert sum(int(x.shape[0]) for x, _ in c) == 48
    p = c.stats()["telemetry"]["placement"]
    assert p["asked"] == "cpu" and p["gpu"] == 0 and p["why"] == ""


def test_share_needs_the_stage(ds):
    with pytest.raises(Exception, match="gpu_share 500: 0..0 per mille") as e:
        sluice.Loader(ds, 8, 32, gpu_share=500)
    assert re.search(NO_STAGE.replace("placement gpu: no GPU stage: ", ""),
                     str(e.value)), str(e.value)
    l = sluice.Loader(ds, 8, 32)
    with pytest.raises(Exception, match="GPU stage is not in use"):
        l.set("gpu_share", 100)
    l.set("gpu_share", 0)
    for bad in ("gpu", "GPU", 2):
        with pytest.raises(ValueError, match="placement"):
            sluice.Loader(ds, 8, 32, placement=bad if bad != "gpu" else "tpu")
    with pytest.raises(ValueError, match="gpu_share"):
        sluice.Loader(ds, 8, 32, gpu_share=1001)


def test_torch_passes_the_trainers_gpu(ds):
    """sluice.torch.DataLoader gives the GPU stage the trainer's device
    (so each DDP rank decodes on its own GPU) under auto, the default, as
    under placement gpu; not under placement cpu, nor over the user's
    gpu_device=; without a device and CUDA not started, the launcher's
    LOCAL_RANK (each rank on its own GPU, not all on GPU 0; a rank given
    one GPU by CUDA_VISIBLE_DEVICES: that one), else none (GPU 0), and it
    does not start CUDA to ask."""
    torch = pytest.importorskip("torch")
    import sluice.torch as st
    got = lambda **kw: st.DataLoader(ds, batch_size=8, image_size=32, **kw)._loader.options["gpu_device"]
    assert got(device="cuda:1") == 1
    assert got(device=torch.device("cuda", 2)) == 2
    assert got(device="cuda:1", placement="auto") == 1
    assert got(device="cuda:1", gpu_device=3) == 3
    assert got(device="cuda:1", placement="cpu") == 0
    assert got(device="cpu") == 0
    if not torch.cuda.is_initialized():
        env = {k: os.environ.pop(k, None)
               for k in ("LOCAL_RANK", "CUDA_VISIBLE_DEVICES")}
        try:
            assert got() == 0 and got(device="cuda") == 0
            os.environ["LOCAL_RANK"] = "1"
            assert got() == 1 and got(device="cuda") == 1
            assert got(device="cpu") == 0 and got(device="cuda:0") == 0
            os.environ["CUDA_VISIBLE_DEVICES"] = "3"
            assert got() == 0
        finally:
            for k, v in env.items():
                os.environ.pop(k, None)
                if v is not None:
                    os.environ[k] = v
        assert not torch.cuda.is_initialized()


def test_the_package_names_its_cuda_wheel_folders(tmp_path):
    """At import the package tells the engine which of its sys.path
    folders hold NVIDIA's wheels (SL_PYTHON_SITE), where the GPU stage
    looks for the CUDA runtime and nvJPEG: a pyenv or conda Python's
    site-packages is not among the fixed places. Its own come first,
    then what it inherited; a relative entry is made absolute, one that
    is not a str path is passed over."""
    import subprocess
    (tmp_path / "nvidia" / "nvjpeg" / "lib").mkdir(parents=True)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([PYDIR, str(tmp_path)]))
    env.pop("SL_PYTHON_SITE", None)
    show = "import os, sluice; print(os.environ.get('SL_PYTHON_SITE'))"
    p = subprocess.run([sys.executable, "-c", show], env=env,
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    assert str(tmp_path) in p.stdout.strip().split(os.pathsep)
    assert PYDIR not in p.stdout  # no nvidia/ there
    env["SL_PYTHON_SITE"] = "/mine"
    p = subprocess.run([sys.executable, "-c", show], env=env,
                       capture_output=True, text=True, timeout=60)
    parts = p.stdout.strip().split(os.pathsep)
    assert parts[0] == str(tmp_path) and parts[-1] == "/mine"
    odd = ("import os, sys, pathlib; sys.path[:0] = [b'/x', pathlib.Path('/y'), "
           "'rel']; os.chdir(sys.argv[1]); import sluice; "
           "print(os.environ['SL_PYTHON_SITE'])")
    (tmp_path / "rel" / "nvidia").mkdir(parents=True)
    env.pop("SL_PYTHON_SITE")
    p = subprocess.run([sys.executable, "-c", odd, str(tmp_path)], env=env,
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    assert str(tmp_path / "rel") in p.stdout.strip().split(os.pathsep)


def test_gpu_device_is_checked(ds):
    with pytest.raises(Exception, match="gpu_device"):
        sluice.Loader(ds, 8, 32, placement="cpu", gpu_device=-1)
    a = sluice.Loader(ds, 8, 32, placement="cpu", gpu_device=3)
    assert a.options["gpu_device"] == 3  # used only by a GPU stage


_DEVICE_RUN = r"""
import ctypes, sys
import numpy as np
import sluice
src = sys.argv[1]
dev = sluice.Loader(src, 8, 40, placement="gpu", device_batches=True,
                    dct_scale=False, seed=3, epochs=2,
                    gpu_memory_bytes=256 << 20)
cpu = sluice.Loader(src, 8, 40, placement="cpu", dct_scale=False, seed=3,
                    epochs=2)
assert dev.options["device_batches"] is True
n = 0
for (a, la), (b, lb) in zip(dev, cpu):
    assert not hasattr(b, "__cuda_array_interface__")
    ia = a.__cuda_array_interface__
    assert ia["version"] == 3 and ia["typestr"] == "|u1" and ia["stream"] is None
    assert ia["shape"] == b.shape and a.device == 0
    size = int(np.prod(ia["shape"]))
    # the simulated runtime's device memory is host memory: read it back
    x = np.frombuffer((ctypes.c_uint8 * size).from_address(ia["data"][0]),
                      dtype=np.uint8).reshape(ia["shape"])
    assert (x == b).all() and (la == lb).all()
    n += len(la)
print("device batches", n)
# A batch read on a stream of the consumer's own (images._batch.stream, as
# sluice.torch sets it to the current stream): fenced there when it goes.
import os
rt = ctypes.CDLL(os.path.join(os.environ["SL_CUDA_LIB_PATH"], "libcudart.so.13"))
rt.sim_cuda_hold_on.argtypes = [ctypes.c_void_p, ctypes.c_int]
h = ctypes.c_void_p()
assert rt.cudaStreamCreateWithFlags(ctypes.byref(h), 1) == 0
it = iter(sluice.Loader(src, 8, 40, placement="gpu", device_batches=True,
                        seed=3, gpu_memory_bytes=256 << 20))
a, la = next(it)
assert a._batch.stream == 0
a._batch.stream = h.value
assert a._batch.stream == h.value
rt.sim_cuda_hold_on(h, 1)
del a, la  # the labels' array holds the batch too
print("fences on the stream", rt.sim_cuda_hold_on(h, 0))
"""


def test_device_batches_over_the_simulated_runtime(ds):
    """device_batches=True: the images are an object with
    __cuda_array_interface__ (v3, the batch complete: no stream) over the
    GPU stage's memory, the same pixels as the CPU path without DCT
    scaling, labels on the host. Run over the CUDA runtime simulated on
    the CPU (tests/unit/sim_cuda; its device memory is host memory, so the
    test reads it back), in a child with SL_CUDA_LIB_PATH pointing there."""
    import subprocess
    sim = os.environ.get("SL_SIM_CUDA", "")
    if not sim or not os.path.exists(os.path.join(sim, "libcudart.so.13")):
        pytest.skip(f"no simulated CUDA runtime (SL_SIM_CUDA={sim!r})")
    env = dict(os.environ, SL_CUDA_LIB_PATH=sim,
               PYTHONPATH=os.pathsep.join(p for p in (PYDIR, os.environ.get("PYTHONPATH")) if p))
    p = subprocess.run([sys.executable, "-c", _DEVICE_RUN, str(ds)], env=env,
                       capture_output=True, text=True, timeout=120)
    if p.returncode and "not in this build" in p.stderr:
        pytest.skip("the GPU stage is not in this build (no nvcc)")
    assert p.returncode == 0, p.stderr[-2000:]
    assert "device batches 48" in p.stdout
    assert "fences on the stream 1" in p.stdout


def test_gpu_memory_bytes_is_checked(ds):
    with pytest.raises(ValueError, match="gpu_memory_bytes"):
        sluice.Loader(ds, 8, 32, gpu_memory_bytes=-1)
    a = sluice.Loader(ds, 8, 32, placement="cpu", gpu_memory_bytes=1 << 28)
    assert a.options["gpu_memory_bytes"] == 1 << 28  # a GPU stage's only


def test_device_batches_need_the_stage(ds):
    with pytest.raises(Exception) as e:
        sluice.Loader(ds, 8, 32, placement="cpu", device_batches=True)
    assert "device_batches: the GPU stage is not in use" in str(e.value)
