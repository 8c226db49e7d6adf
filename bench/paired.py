"""Paired A/B figures of a benchmark that alternates its variants (ABBA): the cost of B against A per
pair of back-to-back runs, its median and its spread, so that the machine's load, which moves both runs
of a pair alike, cancels out of each figure instead of widening it.
"""

from __future__ import annotations

import random
import statistics


def paired_cost(with_it: list[float], without: list[float], *, lower_is_better: bool,
                resamples: int = 5000, seed: int = 29) -> dict:
    """The cost of a feature from pairs of runs with and without it (``with_it[i]`` beside
    ``without[i]``), in percent: ``with/without − 1`` for a figure where lower is better (CPU seconds per
    record), ``1 − with/without`` where higher is better (throughput); positive = the feature costs.

    ``median_pct`` is the median over the pairs, ``min_pct``/``max_pct`` the extreme pairs, and
    ``ci95_pct`` a percentile bootstrap of the median (pairs resampled with replacement, seeded so a run's
    report is reproducible from its figures)."""
    if len(with_it) != len(without):
        raise ValueError(f"paired runs needed: {len(with_it)} with vs {len(without)} without")
    pairs = [(a, b) for a, b in zip(with_it, without) if a is not None and b is not None and a > 0 and b > 0]
    if not pairs:
        return {"pairs": 0}
    return summary([100 * (a / b - 1) if lower_is_better else 100 * (1 - a / b) for a, b in pairs], resamples, seed)


def paired_share(part_with: list[float], part_without: list[float], totals: list[float],
                 resamples: int = 5000, seed: int = 29) -> dict:
    """What the feature adds to one part of the cost (the process its code runs in), in percent of the
    whole: ``(part_with − part_without) / total`` per pair, summarized as ``paired_cost``."""
    if not len(part_with) == len(part_without) == len(totals):
        raise ValueError(f"paired runs needed: {len(part_with)}, {len(part_without)}, {len(totals)}")
    triples = [(a, b, t) for a, b, t in zip(part_with, part_without, totals)
               if a is not None and b is not None and t]
    if not triples:
        return {"pairs": 0}
    return summary([100 * (a - b) / t for a, b, t in triples], resamples, seed)


def summary(costs: list[float], resamples: int = 5000, seed: int = 29) -> dict:
    """Median, extremes and a seeded percentile bootstrap of the median of per-pair costs (percent)."""
    rng = random.Random(seed)
    medians = sorted(statistics.median(rng.choices(costs, k=len(costs))) for _ in range(resamples))
    return {"pairs": len(costs), "per_pair_pct": [round(c, 2) for c in costs],
            "median_pct": round(statistics.median(costs), 2),
            "min_pct": round(min(costs), 2), "max_pct": round(max(costs), 2),
            "ci95_pct": [round(medians[int(0.025 * (resamples - 1))], 2),
                         round(medians[int(0.975 * (resamples - 1))], 2)]}


def per_thousand(seconds: float | None, rows: int) -> float | None:
    """Seconds per 1,000 records (None without records or seconds)."""
    return 1000 * seconds / rows if rows and seconds is not None else None
