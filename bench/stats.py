"""Small, dependency-free statistics for the benchmark: percentiles, median and spread of repetitions."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any


def percentile(values: Sequence[float], q: float) -> float:
    """The ``q``-th percentile (0..100) by linear interpolation between closest ranks (numpy's default).

    Raises ``ValueError`` on an empty sequence or ``q`` outside 0..100.
    """
    if not values:
        raise ValueError("percentile of no values")
    if not 0 <= q <= 100:
        raise ValueError(f"q must be within 0..100, got {q}")
    ordered = sorted(values)
    position = (len(ordered) - 1) * q / 100
    low, high = math.floor(position), math.ceil(position)
    if low == high:
        return float(ordered[low])
    return float(ordered[low] + (ordered[high] - ordered[low]) * (position - low))


def median(values: Sequence[float]) -> float:
    """The median (50th percentile)."""
    return percentile(values, 50)


def spread(values: Sequence[float]) -> dict[str, Any]:
    """Median, min and max of per-repetition figures, plus the count: ``{"median", "min", "max", "n"}``."""
    if not values:
        return {"median": None, "min": None, "max": None, "n": 0}
    return {"median": median(values), "min": float(min(values)), "max": float(max(values)), "n": len(values)}


def latency_summary(samples_s: Sequence[float], quantiles: Sequence[int] = (50, 95)) -> dict[str, Any]:
    """``n``, ``p<q>_ms`` for each of ``quantiles`` and ``max_ms`` of latency samples given in seconds, reported in
    milliseconds (all ``None`` but ``n`` without samples)."""
    keys = [f"p{q}_ms" for q in quantiles]
    if not samples_s:
        return {"n": 0, **dict.fromkeys(keys), "max_ms": None}
    return {
        "n": len(samples_s),
        **{key: percentile(samples_s, q) * 1000 for key, q in zip(keys, quantiles, strict=True)},
        "max_ms": max(samples_s) * 1000,
    }


def ratio(numerator: float | None, denominator: float | None) -> float | None:
    """``numerator / denominator``, or ``None`` when either is missing or the denominator is not positive."""
    if numerator is None or denominator is None or denominator <= 0:
        return None
    return numerator / denominator
