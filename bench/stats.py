"""Statistics shared by the benchmark suites (bench/peers, bench/scenarios):
mean, sample standard deviation, 95% confidence interval of the mean
(Student's t), and the paired t-test across repeats.

    from stats import summary, paired_t
    summary([1.0, 1.2, 0.9])       -> {"n", "mean", "std", "ci95_lo", "ci95_hi"}
    paired_t(a, b)                 -> {"n", "mean_diff", "t", "p"}  (two-sided)
"""
import math

from scipy import stats as _st


def mean(xs):
    xs = list(xs)
    return sum(xs) / len(xs) if xs else float("nan")


def std(xs):
    """Sample standard deviation (n - 1); 0 for one value."""
    xs = list(xs)
    if len(xs) < 2:
        return 0.0
    m = mean(xs)
    return math.sqrt(sum((x - m) ** 2 for x in xs) / (len(xs) - 1))


def median(xs):
    xs = sorted(xs)
    n = len(xs)
    if n == 0:
        return float("nan")
    return xs[n // 2] if n % 2 else 0.5 * (xs[n // 2 - 1] + xs[n // 2])


def ci95(xs):
    """95% confidence interval of the mean (Student's t); (m, m) for n < 2."""
    xs = list(xs)
    m = mean(xs)
    if len(xs) < 2:
        return (m, m)
    h = float(_st.t.ppf(0.975, len(xs) - 1)) * std(xs) / math.sqrt(len(xs))
    return (m - h, m + h)


def summary(xs):
    xs = list(xs)
    lo, hi = ci95(xs)
    return {"n": len(xs), "mean": mean(xs), "std": std(xs), "median": median(xs),
            "ci95_lo": lo, "ci95_hi": hi}


def paired_t(a, b):
    """Two-sided paired t-test of a against b (same repeats, same order).
    p is None when it cannot be computed (n < 2 or all differences equal)."""
    a, b = list(a), list(b)
    if len(a) != len(b):
        raise ValueError("paired_t: samples differ in length")
    d = [x - y for x, y in zip(a, b)]
    n = len(d)
    res = {"n": n, "mean_diff": mean(d), "t": None, "p": None}
    if n < 2 or std(d) == 0.0:
        return res
    t = mean(d) / (std(d) / math.sqrt(n))
    res["t"] = t
    res["p"] = float(2.0 * _st.t.sf(abs(t), n - 1))
    return res


def fmt(xs, digits=1):
    """'mean ± std' for a table cell."""
    s = summary(xs)
    return f"{s['mean']:.{digits}f} ± {s['std']:.{digits}f}"
