"""Cost per slot (issue 14): three ways to run a scheduled query, priced from the price table
(``lambdas/athena_refresh/prices.toml``) by :func:`athena_refresh.cost.estimate_slot_cost`:

- **ours**: N racers fanned out by N schedules: 1 winner (acquire, record_state, heartbeats, the fenced commit
  transaction carrying the result item and LATEST), N-1 losers (one failed conditional write each), 1 Athena
  query, N Scheduler invocations, N Lambda requests;
- **single**: one scheduled runner and no lock: 1 invocation, 1 query, 1 plain PutItem of the result item
  (cheapest, and unsafe: a retry or a duplicate delivery runs the query again and nothing fences the write);
- **unlocked**: N unlocked runners, what the seed's teams had: N invocations, N queries (each its own: no shared
  ClientRequestToken), N result writes.

The figures (:class:`SlotFigures`) come from :func:`bench.cost_measure.measure_slot` (one real slot on a DynamoDB
endpoint) and scenario 1's bytes, else from ``tools.cost``'s model (:func:`modelled_units`). The Athena wait is
not measurable locally: every alternative gets the same assumed query time (``tools.cost``'s winner duration,
:data:`ASSUMED_QUERY_MS`) on top of its own measured work; only the differences matter. Not counted, for any
alternative: cold starts, CloudWatch, S3 (Athena's result objects), free tiers.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from athena_refresh import contract
from athena_refresh.cost import SlotUsage, Usage, athena_billed_bytes, estimate, estimate_slot_cost, load_prices
from slotlock.capacity import item_size_bytes
from tools.cost.usage import (
    DEFAULT_LOSER_DURATION_MS,
    DEFAULT_WINNER_DURATION_S,
    LOSER_WRITE_UNITS,
    single_write_units,
    winner_writes,
)

RACER_COUNTS = (3, 9)
#: The Athena query's time as the winner sees it (start, polls, done), the same for every alternative.
ASSUMED_QUERY_MS = DEFAULT_WINNER_DURATION_S * 1000
ALTERNATIVES = ("ours", "single", "unlocked")
LABELS = {
    "ours": "ours: N racers, slotlock",
    "single": "1 runner, no lock",
    "unlocked": "N runners, no lock",
}


# --------------------------------------------------------------------------------------------------
# The figures a slot is priced from
# --------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class SlotFigures:
    """One slot's figures (see the module docstring); ``sources`` says where each group comes from."""

    scan_bytes: int
    winner_lock_ms: float  # ours: the winner's own time besides the query (lock, record_state, results, commit)
    loser_ms: float  # ours: one loser's time to its lock decision
    runner_own_ms: float  # an unlocked runner's own time besides the query (results, one PutItem)
    winner_write_units: float  # acquire + record_state + commit (heartbeats apart)
    loser_write_units: float
    put_write_units: float
    winner_requests: Mapping[str, int]
    loser_requests: Mapping[str, int]
    put_requests: Mapping[str, int]
    memory_mb: int
    winner_read_units: float = 0.0
    heartbeats: int = 0
    heartbeat_write_units: float = 1.0
    assumed_query_ms: float = ASSUMED_QUERY_MS
    units_source: str = "modelled"
    architecture: str = contract.LAMBDA_ARCHITECTURE
    sources: Mapping[str, str] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def _usage(figures: SlotFigures, racers: int, alternative: str, loser_ms: float | None = None) -> SlotUsage:
    common = {"memory_mb": figures.memory_mb, "architecture": figures.architecture}
    runner_ms = figures.assumed_query_ms + figures.runner_own_ms
    if alternative == "ours":
        return SlotUsage(
            data_scanned_bytes=(figures.scan_bytes,),
            winner_billed_ms=figures.assumed_query_ms + figures.winner_lock_ms,
            loser_billed_ms=figures.loser_ms if loser_ms is None else loser_ms,
            racers=racers,
            read_units=figures.winner_read_units,
            write_units=figures.winner_write_units + figures.heartbeats * figures.heartbeat_write_units,
            loser_write_units=figures.loser_write_units,
            **common,
        )
    count = 1 if alternative == "single" else racers  # every unlocked runner is a whole runner
    return SlotUsage(
        data_scanned_bytes=(figures.scan_bytes,) * count,
        winner_billed_ms=runner_ms,
        loser_billed_ms=runner_ms,
        racers=count,
        write_units=figures.put_write_units,
        loser_write_units=figures.put_write_units,
        **common,
    )


def _requests(figures: SlotFigures, racers: int, alternative: str) -> dict[str, Any]:
    if alternative == "ours":
        dynamodb = Counter(figures.winner_requests)
        for operation, n in figures.loser_requests.items():
            dynamodb[operation] += n * (racers - 1)
        queries, invocations = 1, racers
    else:
        invocations = queries = 1 if alternative == "single" else racers
        dynamodb = Counter({op: n * invocations for op, n in figures.put_requests.items()})
    return {
        "lambda_invocations": invocations,
        "scheduler_invocations": invocations,
        "athena_queries": queries,
        "dynamodb_requests": sum(dynamodb.values()),
        "dynamodb_by_operation": dict(sorted(dynamodb.items())),
    }


def alternatives(figures: SlotFigures, racers: int, prices: Any = None) -> dict[str, Any]:
    """The three alternatives' cost per slot for ``racers`` (USD by service, usage, requests) and the goals:
    our lock's overhead (ours - single) against one minimum-billed Athena query, and N unlocked runners' Athena
    cost against N x ours."""
    prices = prices or load_prices()
    out: dict[str, Any] = {"racers": racers}
    for alternative in ALTERNATIVES:
        slot_estimate = estimate_slot_cost(_usage(figures, racers, alternative), prices)
        out[alternative] = {**slot_estimate.as_dict(), "requests": _requests(figures, racers, alternative)}
    reference = estimate(
        Usage(athena_billed_bytes=athena_billed_bytes(0, min_mb=prices.athena_min_mb_per_query)), prices
    ).athena
    overhead = round(out["ours"]["estimated_cost_usd"] - out["single"]["estimated_cost_usd"], 10)
    modelled_loser = estimate_slot_cost(_usage(figures, racers, "ours", DEFAULT_LOSER_DURATION_MS), prices)
    ours_athena = out["ours"]["by_service_usd"]["athena"]
    unlocked_athena = out["unlocked"]["by_service_usd"]["athena"]
    out["overhead"] = {
        "usd": overhead,
        "by_service_usd": {
            service: round(out["ours"]["by_service_usd"][service] - out["single"]["by_service_usd"][service], 10)
            for service in out["ours"]["by_service_usd"]
        },
        "reference_usd": reference,
        "reference": f"one minimum-billed Athena query ({prices.athena_min_mb_per_query} MB)",
        "met": overhead < reference,
        "with_modelled_loser_usd": round(modelled_loser.total_usd - out["single"]["estimated_cost_usd"], 10),
        "modelled_loser_ms": DEFAULT_LOSER_DURATION_MS,
    }
    ratio = unlocked_athena / ours_athena if ours_athena else None
    out["athena_multiple"] = {"ratio": ratio, "limit": racers, "met": ratio is not None and ratio >= racers - 1e-9}
    return out


def alternatives_for(figures: SlotFigures, racer_counts: Sequence[int], prices: Any = None) -> dict[str, Any]:
    prices = prices or load_prices()
    return {"prices": prices.label(), **{str(n): alternatives(figures, n, prices) for n in racer_counts}}


# --------------------------------------------------------------------------------------------------
# Measured or modelled figures
# --------------------------------------------------------------------------------------------------
#: Where the priced DynamoDB units come from, in order of preference.
UNIT_SOURCES = {
    "reported": "measured: the endpoint's ConsumedCapacity (a failed conditional write computed from ALL_OLD)",
    "aws_rule": "AWS's published rule on the items the slot wrote (read back), history-index copies included",
    "modelled": "modelled by tools.cost (the runtime's own estimate: no index writes)",
}


def unit_sets(measurement: Mapping[str, Any] | None, job: Any) -> dict[str, Mapping[str, Any]]:
    """The DynamoDB unit figures available, by source (:data:`UNIT_SOURCES`)."""
    if measurement is None:
        return {"modelled": modelled_units(job, None)}
    found = {name: measurement.get(f"{name}_units") for name in UNIT_SOURCES}
    return {name: units for name, units in found.items() if units}


def slot_figures(
    measurement: Mapping[str, Any] | None, *, scan_bytes: int, job: Any, units: str | None = None
) -> SlotFigures:
    """The figures from :func:`bench.cost_measure.measure_slot`'s output and ``scan_bytes``, with the DynamoDB units
    of ``units`` (default: the first available of :data:`UNIT_SOURCES`). Without a measurement, everything but
    the bytes is ``tools.cost``'s model (a loser's 100 ms, the winner's and runner's own time 0)."""
    config = job.config
    model = modelled_units(job, None) if measurement is None else measurement["modelled_units"]
    available = unit_sets(measurement, job)
    chosen = units or next(iter(available))
    priced = available[chosen]
    sources = {
        "scan_bytes": "measured: scenario 1, 1x history, partitioned (local engine, Athena's byte rule)",
        "query": f"assumed: {ASSUMED_QUERY_MS / 1000:g} s Athena wait for every alternative (tools.cost's"
        " winner duration; not measurable locally)",
        "heartbeats": f"modelled (tools.cost): {model['heartbeats']} in {ASSUMED_QUERY_MS / 1000:g} s at"
        f" {config.heartbeat_interval_s} s intervals, {model['heartbeat_write_units']:g} WRU each",
        "units": f"{chosen}: {UNIT_SOURCES[chosen]}"
        + (f" on {measurement['endpoint']}" if measurement and chosen != "modelled" else ""),
    }
    if measurement is None:
        sources["durations"] = f"modelled (tools.cost): loser {DEFAULT_LOSER_DURATION_MS:g} ms, own work 0"
        durations = {"winner_lock": 0.0, "loser": DEFAULT_LOSER_DURATION_MS, "runner_own": 0.0}
        requests = {"winner": {"TransactWriteItems": 2, "UpdateItem": 1}, "loser": {"UpdateItem": 1}}
        requests["runner"] = {"PutItem": 1}
    else:
        where, reps = measurement["endpoint"], measurement["repetitions"]
        sources["durations"] = f"measured on {where}: medians of {reps} slots, time inside the query engine excluded"
        sources["requests"] = f"measured on {where} (botocore hooks)"
        durations, requests = measurement["durations_ms"], measurement["requests"]
    return SlotFigures(
        scan_bytes=scan_bytes,
        winner_lock_ms=durations["winner_lock"],
        loser_ms=durations["loser"],
        runner_own_ms=durations["runner_own"],
        winner_read_units=float(priced.get("winner_read_units", 0.0)),
        winner_write_units=float(priced["winner_write_units"]),
        loser_write_units=float(priced["loser_write_units"]),
        put_write_units=float(priced["put_write_units"]),
        winner_requests=requests["winner"],
        loser_requests=requests["loser"],
        put_requests=requests["runner"],
        memory_mb=config.lambda_memory_mb,
        heartbeats=model["heartbeats"],
        heartbeat_write_units=model["heartbeat_write_units"],
        units_source=chosen,
        sources=sources,
    )


def modelled_units(job: Any, commit: tuple[Sequence[Mapping[str, Any]], Mapping[str, Any]] | None) -> dict[str, Any]:
    """``tools.cost``'s model of the same slot: ``commit`` is the results store's (writes, summary); ``None``:
    a result item of about 1 KB."""
    writes, summary = commit if commit else ((), {})
    model = winner_writes(
        duration_s=ASSUMED_QUERY_MS / 1000,
        heartbeat_interval_s=float(job.config.heartbeat_interval_s),
        result_writes=writes,
        summary_bytes=len(json.dumps(summary, default=str)),
    )
    item = writes[0]["Put"]["Item"] if writes else None
    return {
        "winner_write_units": float(model.acquire + model.record_state + model.commit),
        "by_phase": {"acquire": model.acquire, "record_state": model.record_state, "commit": model.commit},
        "heartbeats": model.heartbeats,
        "heartbeat_write_units": float(model.heartbeat_units),
        "loser_write_units": float(LOSER_WRITE_UNITS),
        "put_write_units": float(single_write_units(item_size_bytes(item) if item else 1024)),
    }


def accounting_reference(accounting: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """The accounting scenario's slotlock figures (a no-op job: no record_state, no result in the commit) on
    the endpoint that reported capacity, beside the real slot's, when the run has them."""
    if not accounting:
        return None
    last = accounting["last"]
    return {
        role: {
            "requests": last[role]["by_operation"],
            "units": last[role]["capacity_units_reported"] + last[role]["capacity_units_computed"],
        }
        for role in ("winner", "loser", "late")
    }
