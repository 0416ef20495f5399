#!/usr/bin/env python3
"""tf.data service (tf.data.experimental.service), the suite's tf.data
pipeline (tfdata_worker.pipeline: read_file -> sample_distorted_bounding_box
-> decode_and_crop_jpeg -> resize -> flip -> uint8 CHW -> batch) prepared by
--threads worker processes on this machine: a DispatchServer in this
(consumer) process, --threads WorkerServers each in its own process (this
script with --serve), each running the pipeline on a private thread pool of
1 thread (--opt worker_threads=T). The consumer reads
`distribute(processing_mode="distributed_epoch")`: the files are split
across the workers, each image once per epoch; each worker batches its own
share (the last batch of each worker may be short). prefetch(AUTOTUNE) at
the consumer. The worker processes are children of this one (their CPU is
in the measured process tree) and are stopped (joined) before the end; they are started and
registered with the dispatcher before the timed window.
"""
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _common as C  # noqa: E402
import tfdata_worker as T  # noqa: E402


def serve(dispatcher):
    """One tf.data service worker (a process of its own) until killed."""
    import tensorflow as tf
    w = tf.data.experimental.service.WorkerServer(
        tf.data.experimental.service.WorkerConfig(dispatcher_address=dispatcher))
    w.join()


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "--serve":
        return serve(sys.argv[2])
    a = C.parse_args()
    import tensorflow as tf
    svc = tf.data.experimental.service
    tf.random.set_seed(a.seed)
    tf.config.threading.set_inter_op_parallelism_threads(2)
    tf.config.threading.set_intra_op_parallelism_threads(1)
    wt = int(a.opts.get("worker_threads", "1"))
    dispatcher = svc.DispatchServer(svc.DispatcherConfig(port=0))
    addr = dispatcher.target.split("://")[1]
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
    workers = [subprocess.Popen([sys.executable, os.path.abspath(__file__), "--serve", addr], env=env)
               for _ in range(a.threads)]
    t0 = time.monotonic()  # their start-up (TF imports) is not the loader's
    while dispatcher._num_workers() < a.threads:
        if time.monotonic() - t0 > 300 or any(w.poll() is not None for w in workers):
            raise RuntimeError(f"tf.data service: {dispatcher._num_workers()} of {a.threads} "
                               "workers registered")
        time.sleep(0.1)
    C.ready()

    def build():
        ds = T.pipeline(tf, a, wt)
        ds = ds.apply(svc.distribute(processing_mode="distributed_epoch", service=dispatcher.target))
        return ds.prefetch(tf.data.AUTOTUNE)

    def close(_ds):
        for w in workers:
            w.kill()
        for w in workers:
            w.wait()

    cfg = (f"tf.data service: DispatchServer in the consumer, {a.threads} WorkerServer processes; "
           f"{T.pipeline_config(a, wt)} -> distribute(distributed_epoch) -> prefetch(AUTOTUNE) at the consumer")
    C.measure(a, build, lambda L, e: L, T.to_numpy, close=close,
              version=f"tensorflow-cpu {tf.__version__}", config=cfg)


if __name__ == "__main__":
    C.main_guard(main)
