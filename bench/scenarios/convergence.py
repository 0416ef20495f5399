"""How fast a run reaches its steady rate, and how often its knobs turn
back, from a sluice telemetry file (JSON Lines, docs/TELEMETRY.md):
bench/scenarios/regimes (issue 20 items 2 and 3).

Time to 90 %: within a phase (the run up to a mid-run change, or from the
change to the end), the rate over a trailing window (~1 s: max(1 s, the
time of 3 batches at the phase's final rate), clipped to the phase, at
least half of it inside), from samples_total (the per-interval
samples_per_s is 0 or a whole batch's worth at these rates); the phase's
steady rate is the median of those windows over its final third; the time
is when the first window reaches 90 % of it, from the phase's start.

Knob reversals: in the telemetry's decisions, how often one knob's
direction of change flips (an undo counts).
"""
import json
import statistics


def read_telemetry(path):
    rows = []
    with open(path) as f:
        for line in f:
            line = line.strip()
            if line:
                rows.append(json.loads(line))
    return rows


def window_rates(rows, a, b, w):
    """[(t, samples/s over the trailing window clipped at a)] for t in (a, b]."""
    pts = [(o["t"], o["samples_total"]) for o in rows]
    out = []
    for t, s in pts:
        if t <= a or t > b:
            continue
        lo = max(a, t - w)
        if t - lo < w / 2:
            continue
        # samples at the latest point at or before lo (0 before the first)
        s0 = 0
        for t1, s1 in pts:
            if t1 > lo:
                break
            s0 = s1
        out.append((t, (s - s0) / (t - lo)))
    return out


def t90(rows, a, b, batch):
    """Time from a to the first trailing window at >= 90 % of the phase's
    steady rate, and that rate (None, rate when never reached)."""
    inside = [(o["t"], o["samples_total"]) for o in rows if a < o["t"] <= b]
    if len(inside) < 2 or b <= a:
        return None, None, None
    s_a = next((s for t, s in reversed([(o["t"], o["samples_total"]) for o in rows])
                if t <= a), 0)
    third = a + 2 * (b - a) / 3
    s_3 = next((s for t, s in reversed(inside) if t <= third), s_a)
    mean_end = (inside[-1][1] - s_3) / max(1e-9, inside[-1][0] - third)
    w = max(1.0, 3 * batch / mean_end) if mean_end > 0 else 1.0
    rates = window_rates(rows, a, b, w)
    tail = [r for t, r in rates if t >= third]
    if not tail:
        return None, None, w
    steady = statistics.median(tail)
    if steady <= 0:
        return None, 0.0, w
    hit = next((t for t, r in rates if r >= 0.9 * steady), None)
    return (round(hit - a, 2) if hit is not None else None), round(steady, 1), round(w, 2)


def reversals(rows):
    """Per knob, how often the direction of its changes flips."""
    last, out = {}, {}
    for o in rows:
        d = o.get("decision")
        if not d or d.get("to") == d.get("from"):
            continue
        sign = 1 if d["to"] > d["from"] else -1
        k = d["knob"]
        out.setdefault(k, 0)
        if k in last and last[k] != sign:
            out[k] += 1
        last[k] = sign
    return out


def convergence(rows, plan, batch):
    dur = plan["duration"]
    ch = plan.get("change_s")
    end = rows[-1]["t"] if rows else dur
    ts, ss, w1 = t90(rows, 0.0, ch if ch else end, batch)
    out = {"t90_start_s": ts, "steady_start": ss, "window_start_s": w1}
    if ch:
        tc, sc, w2 = t90(rows, ch, end, batch)
        out.update(t90_change_s=tc, steady_change=sc, window_change_s=w2)
    rev = reversals(rows)
    out.update(reversals=rev, reversals_total=sum(rev.values()),
               decisions=rows[-1].get("decisions_total", 0) if rows else 0)
    return out
