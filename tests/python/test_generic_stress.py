

def test_full_dev_shm_is_a_clear_error(monkeypatch):
    """/dev/shm without room for a slot: an OSError naming /dev/shm at slot
    creation (before: pages were allocated on first touch, a SIGBUS in a
    worker or the main process), and no segment left behind."""
    import errno

    def full(fd, off, size):
        raise OSError(errno.ENOSPC, "No space left on device")

    before = set(os.listdir("/dev/shm"))
    monkeypatch.setattr(_generic.os, "posix_fallocate", full)
    ld = _generic.GenericLoader(Augmented(), batch_size=B, num_workers=2)
    with pytest.raises(OSError, match=r"cannot reserve a .* batch slot in /dev/shm"):
        next(iter(ld))
    ld.close()
    assert not [n for n in set(os.listdir("/dev/shm")) - before if n.startswith("psm_")]
    assert not multiprocessing.active_children()
