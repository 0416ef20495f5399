#!/usr/bin/env python3
"""sluice through its CLI: `sluice bench DATA --json` (no Python in the
loop, no torch).  The CLI checks nothing per batch, so the correctness
fields come from its own counters (samples per epoch, errors_skipped).
Binary: SLUICE_BIN (bench/peers/run sets build-peers/sluice)."""
import json
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _common as C  # noqa: E402


def main():
    a = C.parse_args()
    C.ready()
    binary = os.environ.get("SLUICE_BIN") or "sluice"
    _classes, samples = C.list_imagefolder(a.data)
    cmd = [binary, "bench", a.data, "--batch", str(a.batch), "--size", str(a.size),
           "--threads", str(a.threads), "--out", a.out, "--epochs", str(a.epochs),
           "--seed", str(a.seed), "--json", "--quiet"]
    if a.step_ms > 0:
        cmd += ["--step-ms", str(a.step_ms)]
    t0 = time.perf_counter()
    p = subprocess.run(cmd, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    fig = None
    for line in reversed(p.stdout.strip().splitlines()):
        if line.startswith("{"):
            fig = json.loads(line)
            break
    if p.returncode != 0 or fig is None:
        raise RuntimeError(f"{' '.join(cmd)}: rc={p.returncode} {p.stderr[-500:]}")
    errors = []
    want = len(samples) * a.epochs
    if fig.get("samples") != want:
        errors.append(f"{fig.get('samples')} samples delivered, want {want}")
    if fig.get("errors_skipped"):
        errors.append(f"errors_skipped={fig['errors_skipped']}")
    ver = subprocess.run([binary, "--version"], capture_output=True, text=True).stdout.strip() or "0.1.0"
    n = fig.get("samples", 0)
    C.emit({
        "ok": not errors, "images": n, "batches": fig.get("batches"), "epochs": a.epochs,
        "dataset_images": len(samples), "seconds": wall,
        # the CLI's own rate (its start, folder scan included, to the last
        # batch): it reports no first-batch time, so no steady rate either;
        # img_s_total is the process's wall time (exec and exit included)
        "img_s": fig.get("samples_per_s"), "img_s_total": n / wall if wall > 0 else None,
        "first_batch_s": None, "cpu_s": fig.get("cpu_seconds"),
        "cpu_s_per_img": fig["cpu_seconds"] / n if n and fig.get("cpu_seconds") is not None else None,
        "cpu_s_per_img_total": fig["cpu_seconds"] / n if n and fig.get("cpu_seconds") is not None else None,
        "stall_fraction": fig.get("stall_fraction") if a.step_ms > 0 else None,
        "version": ver.splitlines()[0] if ver else "", "errors": errors, "n_errors": len(errors),
        "config": " ".join(["sluice"] + cmd[1:]).replace(a.data, "DIR")
                  + "; dtype/shape per batch not visible to this worker (no Python in the loop)",
        "cli": fig})


if __name__ == "__main__":
    C.main_guard(main)
