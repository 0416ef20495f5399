"""sluice.volumes.DataLoader and bad input or options: target_spacing in
doubles (a ratio that lands on a whole number gives the reference's shape),
each `for` loop one epoch of the stream after an error too, on_error="skip"
(the bad case left out of its batch, counted and listed), options out of
range a ValueError naming them, unlabeled cases."""

import gc

import numpy as np
import pytest

nib = pytest.importorskip("nibabel")
sv = pytest.importorskip("sluice.volumes")

QUIET = dict(oversampling=0, flip_prob=0, brightness_prob=0, noise_prob=0, tensors=False)


def save(path, arr, sp):
    im = nib.Nifti1Image(arr, np.diag(tuple(sp) + (1.0,)))
    im.header.set_zooms(sp)
    nib.save(im, str(path))
    return path


def make_list(root, n=4, bad_label=None, seed=0):
    """n cases of 20 x 16 x 12 (x, y, z) as a list file; case bad_label's
    label holds 300 (an error when its offline stage runs)."""
    rng = np.random.default_rng(seed)
    lines = []
    for c in range(n):
        img = rng.integers(-100, 300, (20, 16, 12)).astype(np.int16)
        lbl = np.zeros((20, 16, 12), np.uint8 if c != bad_label else np.uint16)
        lbl[5:10, 4:9, 3:8] = 1
        if c == bad_label:
            lbl[0, 0, 0] = 300
        sp = (1.5, 1.3, 2.0)
        i = save(root / f"img{c}.nii.gz", img, sp)
        la = save(root / f"lab{c}.nii.gz", lbl, sp)
        lines.append(f"{i} {la}")
    p = root / "list.txt"
    p.write_text("\n".join(lines) + "\n")
    return p


def test_target_spacing_ratio_on_a_whole_number(tmp_path):
    """z: 120 slices of 1 mm to the default 1.2 mm is 100 slices (the
    reference: 1 / 1.2 * 120 in float64); target_spacing parsed as float32
    made it 99.999996 -> 99, the patch of 100 then edge-padded."""
    z = np.arange(120, dtype=np.int16) * 2  # a ramp inside the clip range
    img = np.broadcast_to(z, (8, 8, 120)).astype(np.int16)
    lbl = np.zeros((8, 8, 120), np.uint8)
    save(tmp_path / "i.nii", img, (1.6, 1.2, 1.0))
    save(tmp_path / "l.nii", lbl, (1.6, 1.2, 1.0))
    (tmp_path / "list.txt").write_text(f"{tmp_path / 'i.nii'} {tmp_path / 'l.nii'}\n")
    with sv.DataLoader(tmp_path / "list.txt", batch_size=1, patch=(8, 8, 100), threads=1,
                       **QUIET) as dl:
        b = dl.next_batch()
    got = b["image"][0, 0, :, 0, 0]  # (z, y, x)
    # aligned-corners linear resample of the ramp to 100 slices, z-scored
    want = ((np.arange(100) * (119 / 99) * 2) - 101) / 76.9
    assert np.abs(got - want).max() < 1e-4, got[-3:]
    assert got[-1] != got[-2]  # 99 slices: the last one repeated


def stream_ids(path, nb_epochs, **kw):
    """(epoch, index) of each batch's image bytes, from next_batch()."""
    ids = {}
    with sv.DataLoader(path, **kw) as dl:
        for _ in range(nb_epochs * len(dl)):
            try:
                b = dl.next_batch()
            except Exception:
                continue
            ids[b["image"].tobytes()] = (b["epoch"], b["index"])
    return ids


def test_each_loop_is_its_epoch_after_an_error(tmp_path):
    """An error ends its loop; the next loop yields the next epoch's
    batches only (was: range(batches_per_epoch) from wherever the stream
    was, the rest of the failed epoch counted into the next)."""
    path = make_list(tmp_path, n=5, bad_label=1)
    kw = dict(batch_size=2, patch=(8, 8, 6), seed=3, threads=2, **QUIET)
    ids = stream_ids(path, 4, **kw)
    with sv.DataLoader(path, **kw) as dl:
        assert len(dl) == 3
        errors = 0
        for ep in range(4):
            got = []
            try:
                for img, _ in dl:
                    got.append(ids[img.tobytes()])
            except Exception as e:
                assert "lab1.nii.gz" in str(e) and "300" in str(e)
                errors += 1
            assert dl.epoch == ep + 1
            assert all(e == ep for e, _ in got), (ep, got)
            idx = [i for _, i in got]
            assert idx == sorted(idx)
        assert errors == 4  # case 1 is in one batch of every epoch


def test_skip(tmp_path):
    """on_error="skip": the bad case is left out of its batch, every loop
    still one whole epoch of the others; skipped() and stats() say so;
    the stream is the same at 1 and 3 threads."""
    path = make_list(tmp_path, n=5, bad_label=2)
    runs = []
    for threads in (1, 3):
        with sv.DataLoader(path, batch_size=2, patch=(8, 8, 6), seed=3, threads=threads,
                           on_error="skip", **{**QUIET, "noise_prob": 0.5}) as dl:
            got = []
            for ep in range(3):
                n = 0
                for img, lbl in dl:
                    n += img.shape[0]
                    got.append(img.copy())
                assert n == 4  # five cases, one bad
            st = dl.stats()
            sk = dl.skipped()
            assert st["skipped"] == 3 and len(sk) == 3
            assert sk[0].startswith("epoch 0: case ") and "lab2.nii.gz" in sk[0]
            assert "value 300" in sk[0]
            runs.append(got)
    assert all(np.array_equal(a, b) for a, b in zip(*runs))


def test_options_out_of_range(tmp_path):
    path = make_list(tmp_path, n=2)
    for kw, name in [({"target_spacing": (0, 1.2, 1.2)}, "target_spacing"),
                     ({"target_spacing": (1.6, -1, 1.2)}, "target_spacing"),
                     ({"oversampling": 1.5}, "oversampling"),
                     ({"flip_prob": -1}, "flip_prob"),
                     ({"noise_prob": float("nan")}, "noise_prob"),
                     ({"on_error": "ignore"}, "on_error")]:
        with pytest.raises(ValueError, match=name):
            sv.DataLoader(path, patch=(8, 8, 6), **kw)
    for kw, err in [({"patch": (8, 8, 0)}, ValueError),
                    ({"patch": (8, 8, 4097)}, ValueError),
                    ({"patch": (8, 8)}, ValueError),
                    ({"patch": (8, 8, 6.5)}, TypeError),
                    ({"target_spacing": (1, 1)}, ValueError),
                    ({"target_spacing": (1, "a", 1)}, TypeError)]:
        name = next(iter(kw))
        with pytest.raises(err) as e:
            sv.DataLoader(path, **{"patch": (8, 8, 6), **kw})
        assert err is TypeError or name in str(e.value), (kw, e.value)


def test_unlabeled(tmp_path):
    path = make_list(tmp_path, n=2)
    path.write_text(path.read_text().split("\n")[0].split()[0] + "\n")
    with pytest.raises(Exception, match="unlabeled"):
        sv.DataLoader(path, patch=(8, 8, 6))
    with sv.DataLoader(path, batch_size=1, patch=(8, 8, 6), unlabeled=True, **QUIET) as dl:
        b = dl.next_batch()
        assert b["label"].max() == 0 and b["image"].shape == (1, 1, 6, 8, 8)


def test_skip_never_decided_by_the_memory_budget(tmp_path):
    """A case whose offline stage does not fit memory_bytes beside the
    batch buffers (prefetch x threads of them) is not skipped under
    on_error="skip": whether it fits depends on prefetch and threads, and
    the stream must not. The run fails naming the budget instead."""
    path = make_list(tmp_path, n=2)
    rng = np.random.default_rng(1)
    big = save(tmp_path / "big.nii.gz",
               rng.integers(-100, 300, (200, 200, 60)).astype(np.int16), (1.2, 1.2, 1.6))
    lbl = np.zeros((200, 200, 60), np.uint8)
    lbl[50:80, 50:80, 10:20] = 1
    bigl = save(tmp_path / "bigl.nii.gz", lbl, (1.2, 1.2, 1.6))
    with open(path, "a") as f:
        f.write(f"{big} {bigl}\n")

    def sizes(prefetch, threads):
        with sv.DataLoader(path, batch_size=3, patch=(64, 64, 32), threads=threads,
                           prefetch=prefetch, memory_bytes=36_000_000, on_error="skip",
                           **QUIET) as dl:
            return [img.shape[0] for img, _ in dl], dl.skipped()

    assert sizes(1, 1) == ([3], [])
    with pytest.raises(MemoryError, match=r"big\.nii\.gz: its offline stage needs .* memory budget"):
        sizes(8, 2)


def test_loops_keep_to_the_stream_after_skips_and_next_batch(tmp_path):
    """Each loop over a stream where every case is skipped reads two
    epochs' worth of batches and raises (not ever more of them: the loop
    takes the stream's position after the error); a loop after next_batch()
    has read a whole epoch yields the next epoch; a loop left early and
    collected late never moves the epoch back."""
    one = make_list(tmp_path, n=1, bad_label=0).read_text()
    bad = tmp_path / "bad.txt"
    bad.write_text(one * 6)
    with sv.DataLoader(bad, batch_size=1, patch=(8, 8, 6), threads=2, on_error="skip",
                       **QUIET) as dl:
        nb = len(dl)
        for k in range(3):
            with pytest.raises(Exception, match="every case was skipped"):
                for _ in dl:
                    pass
            assert dl._l.position == 2 * nb * (k + 1)
    (tmp_path / "good").mkdir()
    good = make_list(tmp_path / "good", n=4)
    with sv.DataLoader(good, batch_size=2, patch=(8, 8, 6), threads=2, **QUIET) as dl:
        for _ in range(len(dl)):
            assert dl.next_batch()["epoch"] == 0
        assert dl.epoch == 1
        assert len([1 for _ in dl]) == 2 and dl.epoch == 2
        it = iter(dl)
        next(it)  # epoch 2, left early (and not yet collected)
        assert len([1 for _ in dl]) == 1 and dl.epoch == 3  # the rest of it
        assert len([1 for _ in dl]) == 2 and dl.epoch == 4  # epoch 3
        del it
        gc.collect()
        assert dl.epoch == 4


def test_label_shape_refused_at_create(tmp_path):
    """A label whose shape is not its image's fails the loader's creation
    naming both files and shapes (it failed at the case's first read, in
    some epoch's batch); on_error="skip" leaves the case out from the
    start, listed as a create-time skip."""
    path = make_list(tmp_path, n=3)
    save(tmp_path / "lab1.nii.gz", np.zeros((20, 16, 10), np.uint8), (1.5, 1.3, 2.0))
    with pytest.raises(Exception, match=r"lab1\.nii\.gz: the label is 20 x 16 x 10, "
                       r"its image \(.*img1\.nii\.gz\) 20 x 16 x 12"):
        sv.DataLoader(path, batch_size=1, patch=(8, 8, 6), **QUIET)
    with sv.DataLoader(path, batch_size=1, patch=(8, 8, 6), on_error="skip", **QUIET) as dl:
        sk = dl.skipped()
        assert len(sk) == 1 and sk[0].startswith("create: ") and "lab1.nii.gz" in sk[0], sk
        assert len(dl) == 2 and sum(img.shape[0] for img, _ in dl) == 2
