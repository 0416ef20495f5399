#!/usr/bin/env python3
"""bench/peers/plot RESULTS.json [MORE.json ...] -o peers.png

Draws the results of bench/peers/run --json-out (or of its --json last
line saved to a file): one row per results file (e.g. uint8 and float),
three panels per row: images/s per loader (mean, error bar = std over the
repeats, dots = the repeats), CPU ms per image, and peak PSS of the loader's
process tree (the part present right after the imports shaded lighter).
A loader that failed is named in the panels with FAILED.
"""
import argparse
import json
import sys
from pathlib import Path


def load(path):
    text = Path(path).read_text()
    try:
        return json.loads(text)
    except ValueError:
        # the stdout of `run --json`: the last line is the object
        return json.loads(text.strip().splitlines()[-1])


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("results", nargs="+")
    ap.add_argument("-o", "--output", default="peers.png")
    ap.add_argument("--dpi", type=int, default=90)
    args = ap.parse_args(argv)

    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    res = [load(p) for p in args.results]
    fig, axes = plt.subplots(len(res), 3, figsize=(13, 3.4 * len(res) + 0.6), squeeze=False,
                             gridspec_kw={"width_ratios": [1.5, 1, 1]})
    for row, r in enumerate(res):
        meta = r.get("meta", {})
        lo = r["loaders"]
        names = list(lo)
        ok = [n for n in names if "error" not in lo[n]]
        # fastest first, failures last
        ok.sort(key=lambda n: -lo[n]["img_s"])
        order = ok + [n for n in names if n not in ok]
        y = list(range(len(order)))[::-1]
        colors = ["#d62728" if n.startswith("sluice") else "#1f77b4" for n in order]
        ax_r, ax_c, ax_m = axes[row]
        labels = []
        for n in order:
            e = lo[n]
            lab = n
            if "error" not in e and e.get("variant") and e["variant"] != n:
                lab = e["variant"]
            if "error" not in e and not e.get("correct", True):
                lab += " (WRONG)"
            labels.append(lab)
        base = lo.get("sluice", {}).get("img_s") if "error" not in lo.get("sluice", {"error": 1}) else None
        for yi, n, c in zip(y, order, colors):
            e = lo[n]
            if "error" in e:
                for ax in (ax_r, ax_c, ax_m):
                    ax.text(0.01, yi, "FAILED: " + e["error"][:60], va="center", fontsize=7, color="#b00",
                            transform=ax.get_yaxis_transform())
                continue
            ax_r.barh(yi, e["img_s"], xerr=e.get("img_s_std") or 0, color=c, alpha=0.85, capsize=3)
            runs = e.get("img_s_runs") or []
            ax_r.plot(runs, [yi] * len(runs), "k.", ms=3)
            txt = f"{e['img_s']:,.0f}"
            if base and not n.startswith("sluice"):
                txt += f"  ({e['img_s'] / base:.2f}× sluice)"
            right = max([e["img_s"] + (e.get("img_s_std") or 0)] + list(runs))
            ax_r.text(right, yi, "  " + txt, va="center", fontsize=8)
            if e.get("cpu_s_per_img") is not None:
                v = e["cpu_s_per_img"] * 1e3
                ax_c.barh(yi, v, color=c, alpha=0.85)
                ax_c.text(v, yi, f" {v:.2f}", va="center", fontsize=8)
            pk = e["peak_pss_mb"]
            imp = e.get("import_pss_mb") or 0
            ax_m.barh(yi, pk, color=c, alpha=0.35)
            ax_m.barh(yi, min(imp, pk), color=c, alpha=0.85)
            ax_m.text(pk, yi, f" {pk:,.0f}", va="center", fontsize=8)
        for ax in (ax_r, ax_c, ax_m):
            ax.set_yticks(y)
            ax.set_ylim(-0.6, len(order) - 0.4)
            ax.grid(axis="x", alpha=0.3)
            ax.margins(x=0.25)
        ax_r.set_yticklabels(labels, fontsize=9)
        ax_c.set_yticklabels([])
        ax_m.set_yticklabels([])
        out = meta.get("out", "?")
        ax_r.set_title(f"{out}: images/s (mean ± std, dots = repeats) — higher is better", fontsize=9)
        ax_c.set_title("CPU ms per image (process tree) — lower is better", fontsize=9)
        ax_m.set_title("peak PSS MB (dark: after imports) — lower is better", fontsize=9)
        ax_r.set_xlim(left=0)
        ax_c.set_xlim(left=0)
        ax_m.set_xlim(left=0)
    m = res[0].get("meta", {})
    mach = m.get("machine", {})
    la = [(x.get("meta", {}).get("out", "?"), x.get("meta", {}).get("loadavg_start", [None])[0],
           x.get("meta", {}).get("loadavg_end", [None])[0]) for x in res]
    fig.suptitle(f"sluice vs peer loaders — {m.get('images', '?')} ImageNet JPEGs, RandomResizedCrop "
                 f"{m.get('size', 224)} + flip, batch {m.get('batch', 64)}, {m.get('threads', 2)} threads, "
                 f"{m.get('epochs', '?')} epochs × {m.get('repeats', '?')} repeats; "
                 f"{mach.get('cpu_model', '')} ×{mach.get('nproc', '?')}; load avg "
                 + ", ".join(f"{o} {a:.1f}→{b:.1f}" for o, a, b in la if a is not None and b is not None),
                 fontsize=9)
    fig.tight_layout(rect=(0, 0, 1, 0.97))
    fig.savefig(args.output, dpi=args.dpi)
    print(args.output)
    return 0


if __name__ == "__main__":
    sys.exit(main())
