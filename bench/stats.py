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


def latency_summary(samples_s: Sequence[float]) -> dict[str, Any]:
    """p50/p95/max of latency samples given in seconds, reported in milliseconds."""
    if not samples_s:
        return {"n": 0, "p50_ms": None, "p95_ms": None, "max_ms": None}
    return {
        "n": len(samples_s),
        "p50_ms": percentile(samples_s, 50) * 1000,
        "p95_ms": percentile(samples_s, 95) * 1000,
        "max_ms": max(samples_s) * 1000,
    }


def ratio(numerator: float | None, denominator: float | None) -> float | None:
    """``numerator / denominator``, or ``None`` when either is missing or the denominator is not positive."""
    if numerator is None or denominator is None or denominator <= 0:
        return None
    return numerator / denominator
