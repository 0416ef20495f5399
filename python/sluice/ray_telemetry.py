"""Telemetry of a sluice.ray loader (issue 16: the actors' decisions and
the partitioned cache's hits "in telemetry"): JSON Lines in the engine's
snapshot schema (docs/TELEMETRY.md), so `sluice plot` draws them — the
trainer's samples/s and stall, the decode threads across the actors on the
knob panel with every add / remove listed with its reason, and with a
partitioned cache its hit rate.

The trainer process runs no engine of its own (the actors each run one);
this writer sees what the trainer sees: batches and samples taken, the time
it waited for them, the actors and their decisions. A line per interval:

    {"t": s since the loader was made, "interval_s",
     "samples_per_s", "stall_fraction" (the share of the interval the
     trainer waited), "samples_total", "batches_total",
     "knobs": {"decode_threads": live actors x actor_threads},
     "decisions_total", "decision": {"knob": "actors", "from", "to",
     "reason"} (the newest decision since the line before; earlier ones of
     the same interval are counted in decisions_total and listed in
     stats()["decisions"]),
     "ray": {"actors", "target_actors", "actors_started", "actors_failed",
             "rehanded_batches", "batches_completed",
             "window" (batches that may be in flight ahead of the trainer),
             "object_store_bytes" (their byte budget; 0: none),
             "batch_bytes" (a batch's, 0 before the first chunk),
             "in_flight" (batches handed out, not taken),
             "budget_held_total" (hand-outs at which the byte budget, not
             the count window, kept an actor's slot empty)},
     and with partition=True, at most once a second (the actors are asked
     without waiting; their answers go into a later line):
     "cache": {"hits_total" (local + remote), "misses_total" (storage
               reads), "hit_rate" (over the interval since the counts
               before), "remote_hits_total", "remote_bytes_total"}}

A share= job (sluice.ray_group) writes the trainer's fields and "ray":
{"window", "object_store_bytes", "batch_bytes", "budget_held_total"} as
the group's last reply said them (its preparers are the group's:
group_stats()).

The file is written by a daemon thread and flushed each line; close()
writes a last line and closes it.
"""
import json
import threading
import time
import weakref

CACHE_EVERY_S = 1.0


class RayTelemetry:
    def __init__(self, loader, path, interval_ms=100):
        if interval_ms <= 0:
            raise ValueError(f"telemetry_ms {interval_ms}: must be > 0")
        # Weakly: the thread must not keep a loader deleted without
        # close() alive (a share job would never leave its group).
        self._dl = weakref.ref(loader)
        self._f = open(path, "w")
        self._dt = interval_ms / 1000.0
        self._t0 = self._last_t = time.monotonic()
        self._last = (0, 0, 0.0)  # samples, batches, wait_s
        self._ndec = 0
        self._cache = None          # the merged counts of the last answers
        self._cache_prev = None     # (hits, misses) at the last hit rate
        self._cache_asked = None    # [refs] in flight
        self._cache_t = 0.0
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._run, name="sluice.ray telemetry",
                                        daemon=True)
        self._thread.start()

    def _run(self):
        while not self._stop.wait(self._dt):
            if self._dl() is None:  # collected without close()
                with self._lock:
                    self._f.close()
                return
            self.write()

    def _cache_counts(self, now):
        """The partitioned cache's merged counters: collects answers asked
        for earlier, asks again once a second."""
        dl = self._dl()
        if not getattr(dl, "_parts", 0):
            return None
        ray = dl._ray
        if self._cache_asked is not None:
            ready, _ = ray.wait(self._cache_asked, num_returns=len(self._cache_asked),
                                timeout=0)
            if len(ready) == len(self._cache_asked):
                from .ray_cache import merge_stats
                got = []
                for r in ready:
                    try:
                        got.append(ray.get(r))
                    except Exception:  # an actor gone meanwhile
                        pass
                self._cache = merge_stats(got)
                self._cache_asked = None
        if self._cache_asked is None and now - self._cache_t >= CACHE_EVERY_S:
            self._cache_t = now
            refs = []
            for a in list(dl._actors):
                try:
                    refs.append(a.handle.cache_stats.remote())
                except Exception:
                    pass
            self._cache_asked = refs or None
        return self._cache

    def snapshot(self):
        """The next line's object (the counters since the line before);
        None once the loader was collected."""
        dl = self._dl()
        if dl is None:  # collected without close()
            return None
        now = time.monotonic()
        samples, batches, wait = dl._samples, dl._taken, dl._wait_s
        dt = now - self._last_t
        s0, b0, w0 = self._last
        shared = hasattr(dl, "_group")  # a share= job: the group's preparers
        live = [] if shared else dl._live()
        threads = dl._options.get("threads", 1)
        decisions = [] if shared else list(dl._decisions)
        line = {"t": round(now - self._t0, 4),
                "interval_s": round(dt, 4),
                "samples_per_s": (samples - s0) / dt if dt > 0 else None,
                "stall_fraction": min(1.0, max(0.0, (wait - w0) / dt)) if dt > 0 else None,
                "samples_total": samples, "batches_total": batches}
        if not shared:
            line.update({"knobs": {"decode_threads": len(live) * threads},
                         "decisions_total": len(decisions),
                         "ray": {"actors": len(live), "target_actors": dl._target,
                                 "actors_started": dl._next_id,
                                 "actors_failed": dl._failed,
                                 "rehanded_batches": dl._rehanded,
                                 "batches_completed": dl._completed,
                                 "window": dl._window,
                                 "object_store_bytes": dl.object_store_bytes,
                                 "batch_bytes": dl._batch_bytes,
                                 "in_flight": len(dl._ref),
                                 "budget_held_total": dl._budget_held}})
        else:
            line["ray"] = dict(dl._group_store)
        if len(decisions) > self._ndec:
            d = decisions[-1]
            line["decision"] = {"knob": "actors", "from": d["actors_before"],
                                "to": d["actors_after"],
                                "reason": f"{d['action']}: {d['reason']}"}
        self._ndec = len(decisions)
        c = self._cache_counts(now)
        if c is not None:
            hits = c.get("local_hits", 0) + c.get("remote_hits", 0)
            misses = c.get("storage_reads", 0)
            rate = None
            if self._cache_prev is not None:
                dh, dm = hits - self._cache_prev[0], misses - self._cache_prev[1]
                rate = dh / (dh + dm) if dh + dm > 0 and dh >= 0 and dm >= 0 else None
            if self._cache_prev != (hits, misses):
                self._cache_prev = (hits, misses)
            line["cache"] = {"hits_total": hits, "misses_total": misses, "hit_rate": rate,
                             "remote_hits_total": c.get("remote_hits", 0),
                             "remote_bytes_total": c.get("remote_bytes", 0)}
        self._last_t, self._last = now, (samples, batches, wait)
        return line

    def write(self):
        with self._lock:
            line = None if self._f.closed else self.snapshot()
            if line is None:
                return
            self._f.write(json.dumps(line) + "\n")
            self._f.flush()

    def close(self):
        """Stops the thread; a last line; closes the file. Idempotent."""
        self._stop.set()
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join()
        with self._lock:
            if not self._f.closed:
                line = self.snapshot()
                if line is not None:
                    self._f.write(json.dumps(line) + "\n")
                self._f.close()
