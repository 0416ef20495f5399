"""One job of test_ray_share.py (a separate process, a driver of the test's
Ray cluster): attaches to a share group, takes batches, writes what it saw.

    share_job.py SPEC_JSON

SPEC: address, source, share, out (a JSON file written at the end),
epochs (iterations to run), leave_after (batches, then close), sleep (s
per batch), join, lease, ready (a file written once attached) and go (a
file waited for before iterating), progress (a file rewritten with the
batches taken so far), pause_at (batches, then wait for the file
resume), actor_options (the preparers'; default {"num_cpus": 0.5}),
start_warn_s (seconds before it warns that no preparer could start)."""
import hashlib
import json
import os
import sys
import time

import ray
import sluice.ray
import sluice.ray_group


def digest(x, y):
    return hashlib.sha1(x.numpy().tobytes() + y.numpy().tobytes()).hexdigest()


def main():
    spec = json.loads(sys.argv[1])
    ray.init(address=spec["address"], log_to_driver=False)
    if "start_warn_s" in spec:
        sluice.ray_group._START_WARN_S = spec["start_warn_s"]
    # chunk 2: the group's window (2 x 2 x 2 batches) is smaller than an
    # epoch, so a slow or dead job holds the others (what the tests see).
    dl = sluice.ray.DataLoader(spec["source"], 8, 32, seed=11, num_actors=2,
                               chunk=2,
                               actor_options=spec.get("actor_options", {"num_cpus": 0.5}),
                               share=spec["share"],
                               join=spec.get("join", "epoch"),
                               lease=spec.get("lease", 30.0))
    st = dl.state_dict()
    res = {"start": [st["epoch"], st["batch"]], "epochs": [], "pid": os.getpid()}
    if spec.get("ready"):
        open(spec["ready"], "w").close()
    while spec.get("go") and not os.path.exists(spec["go"]):
        time.sleep(0.05)
    taken = 0
    for _ in range(spec.get("epochs", 1)):
        res["epochs"].append([])
        for x, y in dl:
            res["epochs"][-1].append(digest(x, y))
            taken += 1
            if spec.get("progress"):
                with open(spec["progress"] + ".tmp", "w") as f:
                    f.write(str(taken))
                os.replace(spec["progress"] + ".tmp", spec["progress"])
            time.sleep(spec.get("sleep", 0))
            if taken == spec.get("pause_at"):  # until the test says go on
                while not os.path.exists(spec["resume"]):
                    time.sleep(0.05)
            if taken == spec.get("leave_after"):
                break
        if taken == spec.get("leave_after"):
            break
    res["state"] = dl.state_dict()
    res["stats"] = dl.stats()
    dl.close()
    with open(spec["out"], "w") as f:
        json.dump(res, f, default=str)


if __name__ == "__main__":
    main()
