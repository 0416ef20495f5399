"""sluice.Loader(placement=..., gpu_share=...): where samples are decoded
(docs/DESIGN.md, "GPU stage"). Without a GPU stage (this build has none,
and no machine here has a GPU): gpu fails at creation naming why, auto
runs on the CPU and says why in telemetry, the share knob stays 0."""
import os
import re
import sys

import pytest
from conftest import synthetic_folder

SLUICE = os.environ.get("SLUICE")
PYDIR = os.path.join(os.path.dirname(SLUICE), "python") if SLUICE else None
if PYDIR and os.path.isdir(os.path.join(PYDIR, "sluice")):
    sys.path.insert(0, PYDIR)
sluice = pytest.importorskip("sluice", reason="sluice module not built")

# Why a machine without a usable GPU stage has none: a build without the
# kernels (no nvcc), or one with them and no CUDA runtime or device.
NO_STAGE = (r"placement gpu: no GPU stage: (the GPU stage is not in this "
            r"build|no lib(cudart|nvjpeg)\.so\.1[23] found|no CUDA device)")


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


def test_gpu_device_is_checked(ds):
    with pytest.raises(Exception, match="gpu_device"):
        sluice.Loader(ds, 8, 32, placement="cpu", gpu_device=-1)
    a = sluice.Loader(ds, 8, 32, placement="cpu", gpu_device=3)
    assert a.options["gpu_device"] == 3  # used only by a GPU stage
