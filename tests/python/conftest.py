"""Shared helpers of the Python tests."""
import os
import subprocess

import pytest


def synthetic_folder(tmp_path_factory, name, images, classes):
    """A generated ImageFolder (`sluice make-dataset --synthetic`) of
    `images` JPEGs in `classes` classes; skips when SLUICE is not set."""
    sluice = os.environ.get("SLUICE")
    if not sluice:
        pytest.skip("SLUICE not set")
    d = str(tmp_path_factory.mktemp(name) / "ds")
    subprocess.run([sluice, "make-dataset", "--synthetic", d, "--images", str(images),
                    "--classes", str(classes)], check=True, capture_output=True)
    return d
