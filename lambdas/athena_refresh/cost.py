"""What a slot costs, as an estimate: the price table (``prices.toml``, data with sources and dates) and the
arithmetic from measured usage to USD per service.

Per committed slot (:func:`estimate_slot_cost`):

- **Athena**: each billed query's bytes scanned, rounded up to the MB with a 10 MB minimum
  (:func:`athena_billed_bytes`), at the price per TB (https://aws.amazon.com/athena/pricing/; TB = 2^40 bytes,
  MB = 2^20 bytes);
- **Lambda**: the winner's GB-seconds (memory x billed duration) and request, plus the losers, modelled as
  ``racers - 1`` invocations of the winner's own time to its lock decision (a loser does exactly that: start,
  one conditional write, exit) and a request each (https://aws.amazon.com/lambda/pricing/);
- **DynamoDB**: the read and write request units the winner's requests consumed (``ReturnConsumedCapacity``,
  :mod:`slotlock.capacity`), the commit modelled from the items it writes (it records this estimate, so its
  own consumption is only known after it), and the losers' failed conditional writes modelled as the winner's
  acquisition write (DynamoDB reports no capacity with a failed condition);
- **EventBridge Scheduler**: one invocation per racer;
- **S3**: the PUT of rows offloaded to S3 (Athena's own result objects are not counted).

Not counted: free tiers (per account), data transfer, CloudWatch (per month, not per slot: ``make cost``),
storage, KMS, X-Ray. Every figure is an estimate and is labelled so wherever it is shown.
"""

from __future__ import annotations

import functools
import math
import time
import tomllib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, Protocol

from slotlock.capacity import CapacitySnapshot, estimate_write_units

from .errors import ConfigurationError

__all__ = [
    "MB",
    "PRICES_PATH",
    "TB",
    "CostEstimate",
    "InvocationCost",
    "PriceTableError",
    "Prices",
    "SlotUsage",
    "athena_billed_bytes",
    "commit_write_units",
    "estimate_slot_cost",
    "format_usd",
    "load_prices",
]

PRICES_PATH: Final = Path(__file__).resolve().with_name("prices.toml")
MB: Final = 2**20
TB: Final = 2**40
PRICE_TABLE_FORMAT: Final = 1
#: Decimal places kept in USD figures (a slot costs from about 1e-7 USD upwards).
USD_DIGITS: Final = 10
ARCHITECTURES: Final = ("arm64", "x86_64")
#: Bytes the cost attribute adds to each item that carries it (the commit's model counts them).
COST_ATTRIBUTE_BYTES: Final = 768
#: The lock item a commit updates: well under 1 KB (a counter, an owner, a few timestamps).
LOCK_ITEM_BYTES: Final = 600
#: The slot item's attributes besides its summary (keys, status, owner, token, timestamps, TTL).
SLOT_ITEM_BYTES: Final = 400


class PriceTableError(ConfigurationError):
    """The price table is missing, malformed, lacks a price or holds one that is not a finite number >= 0 (``key``
    names it, e.g. ``regions.us-east-1.athena.usd_per_tb_scanned``; ``path``: the table's file)."""

    def __init__(self, path: Path | str, key: str, problem: str) -> None:
        super().__init__(f"price table {path} [{key}]", problem)
        self.path = str(path)
        self.key = key


@dataclass(frozen=True)
class Prices:
    """One region's prices (USD), flattened from ``prices.toml``.

    ``region``: whose prices these are; ``requested_region``: the region asked for (they differ when that one
    is not in the table and ``default_region``'s prices stand in: :attr:`fallback`); ``retrieved``: the date
    the prices were read from ``sources`` (service -> URL).
    """

    region: str
    requested_region: str
    retrieved: str
    athena_usd_per_tb_scanned: float
    athena_min_mb_per_query: int
    lambda_usd_per_gb_s: Mapping[str, float]
    lambda_usd_per_million_requests: float
    dynamodb_usd_per_million_write_units: float
    dynamodb_usd_per_million_read_units: float
    scheduler_usd_per_million_invocations: float
    cloudwatch_usd_per_metric_month: float
    cloudwatch_usd_per_alarm_month: float
    cloudwatch_usd_per_dashboard_month: float
    cloudwatch_usd_per_gb_logs_ingested: float
    cloudwatch_usd_per_gb_month_logs_stored: float
    s3_usd_per_thousand_put: float
    s3_usd_per_thousand_get: float
    apigateway_usd_per_million_http_requests: float
    sources: Mapping[str, str] = field(default_factory=dict)

    @property
    def fallback(self) -> bool:
        """Whether these are another region's prices standing in for :attr:`requested_region`."""
        return self.region != self.requested_region

    def label(self) -> dict[str, Any]:
        """Where the prices come from, for a stored estimate: region, requested region, retrieval date."""
        return {"region": self.region, "requested_region": self.requested_region, "retrieved": self.retrieved}


# (service table, key) -> Prices field; every one must be a finite number >= 0 (not a boolean).
_PRICE_FIELDS: Final = {
    ("athena", "usd_per_tb_scanned"): "athena_usd_per_tb_scanned",
    ("athena", "min_mb_per_query"): "athena_min_mb_per_query",
    ("lambda", "usd_per_million_requests"): "lambda_usd_per_million_requests",
    ("dynamodb", "usd_per_million_write_units"): "dynamodb_usd_per_million_write_units",
    ("dynamodb", "usd_per_million_read_units"): "dynamodb_usd_per_million_read_units",
    ("scheduler", "usd_per_million_invocations"): "scheduler_usd_per_million_invocations",
    ("cloudwatch", "usd_per_metric_month"): "cloudwatch_usd_per_metric_month",
    ("cloudwatch", "usd_per_alarm_month"): "cloudwatch_usd_per_alarm_month",
    ("cloudwatch", "usd_per_dashboard_month"): "cloudwatch_usd_per_dashboard_month",
    ("cloudwatch", "usd_per_gb_logs_ingested"): "cloudwatch_usd_per_gb_logs_ingested",
    ("cloudwatch", "usd_per_gb_month_logs_stored"): "cloudwatch_usd_per_gb_month_logs_stored",
    ("s3", "usd_per_thousand_put"): "s3_usd_per_thousand_put",
    ("s3", "usd_per_thousand_get"): "s3_usd_per_thousand_get",
    ("apigateway", "usd_per_million_http_requests"): "apigateway_usd_per_million_http_requests",
}
#: Keys that count something whole (the billed bytes stay integers): integers only.
_INTEGER_KEYS: Final = frozenset({"min_mb_per_query"})


def load_prices(region: str | None = None, path: Path | str = PRICES_PATH) -> Prices:
    """``region``'s prices from the table at ``path`` (``None``: the table's ``default_region``); a region not
    in the table gets ``default_region``'s prices with ``requested_region`` kept (:attr:`Prices.fallback`).

    Read once per (region, path) per process.

    :raises PriceTableError: the file is missing or not TOML, its ``format`` is unknown, a ``same_as`` chain
        does not end in a region with prices, or a price is missing or not a finite number >= 0 (``nan``,
        ``inf``, a negative number or a boolean; ``min_mb_per_query`` must be an integer), its key named.
    """
    return _load_prices(region, str(path))


@functools.lru_cache(maxsize=16)
def _load_prices(region: str | None, path: str) -> Prices:
    try:
        document = tomllib.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise PriceTableError(path, "file", f"cannot be read as TOML: {exc}") from exc
    if document.get("format") != PRICE_TABLE_FORMAT:
        raise PriceTableError(path, "format", f"must be {PRICE_TABLE_FORMAT}, found {document.get('format')!r}")
    regions = document.get("regions")
    default = document.get("default_region")
    if not isinstance(regions, dict) or not isinstance(default, str) or default not in regions:
        raise PriceTableError(path, "default_region", "must name a region of the [regions] table")
    requested = region or default
    name = requested if requested in regions else default
    entry, seen = regions[name], [name]
    while isinstance(entry, dict) and "same_as" in entry:
        target = entry["same_as"]
        if not isinstance(target, str) or target in seen or target not in regions:
            raise PriceTableError(
                path, f"regions.{seen[-1]}.same_as", f"must name another listed region, got {target!r}"
            )
        seen.append(target)
        entry = regions[target]
    if not isinstance(entry, dict):
        raise PriceTableError(path, f"regions.{name}", "must be a table")
    values: dict[str, Any] = {}
    sources: dict[str, str] = {}
    for (service, key), attribute in _PRICE_FIELDS.items():
        values[attribute] = _price(entry, service, key, path, seen[-1])
        source = entry.get(service, {}).get("source")
        if isinstance(source, str):
            sources[service] = source
    per_gb_s = {arch: _price(entry, "lambda", f"usd_per_gb_s_{arch}", path, seen[-1]) for arch in ARCHITECTURES}
    retrieved = regions[name].get("retrieved") or entry.get("retrieved")
    if not isinstance(retrieved, str):
        raise PriceTableError(path, f"regions.{name}.retrieved", "must give the date the prices were read")
    return Prices(
        region=name,
        requested_region=requested,
        retrieved=retrieved,
        lambda_usd_per_gb_s=per_gb_s,
        sources=sources,
        **values,
    )


def _price(entry: Mapping[str, Any], service: str, key: str, path: str, region: str) -> Any:
    """``entry[service][key]``: a finite number >= 0 (an integer for ``min_mb_per_query``). TOML reads ``nan``
    and ``inf`` as floats, and a boolean is an ``int`` to Python: all refused, with the key named."""
    table = entry.get(service)
    value = table.get(key) if isinstance(table, dict) else None
    integer = key in _INTEGER_KEYS
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or (isinstance(value, float) and (integer or not math.isfinite(value)))
        or value < 0
    ):
        wanted = "an integer" if integer else "a finite number"
        raise PriceTableError(path, f"regions.{region}.{service}.{key}", f"must be {wanted} >= 0, found {value!r}")
    return value


def athena_billed_bytes(data_scanned_bytes: int, *, min_mb: int = 10) -> int:
    """Bytes Athena bills for one query that scanned ``data_scanned_bytes``: rounded up to the MB (2^20 bytes),
    at least ``min_mb`` MB. ``athena_billed_bytes(1) == athena_billed_bytes(10 * MB) == 10 * MB``.

    Integer arithmetic: exact for any size (a float division would round past 2^53 bytes, billing less than
    was scanned). :raises ValueError: ``data_scanned_bytes`` is negative.
    """
    if data_scanned_bytes < 0:
        raise ValueError(f"data_scanned_bytes must be >= 0, got {data_scanned_bytes}")
    return max(min_mb, -(-data_scanned_bytes // MB)) * MB


@dataclass(frozen=True)
class SlotUsage:
    """What one slot used: measured, except where noted as modelled.

    ``data_scanned_bytes``: per billed query (a succeeded one; failed queries are free). ``winner_billed_ms``:
    the winner's duration (plus its INIT when cold). ``loser_billed_ms``: one loser's (modelled: the winner's
    time to its lock decision). ``read_units``/``write_units``: the winner's DynamoDB request units.
    ``loser_write_units``: one loser's failed conditional write (modelled). ``scheduler_invocations``: default
    ``racers``. ``s3_put_requests``/``s3_get_requests``: requests to the results bucket.
    """

    data_scanned_bytes: Sequence[int]
    winner_billed_ms: float
    loser_billed_ms: float
    racers: int
    memory_mb: int
    architecture: str = "arm64"
    read_units: float = 0.0
    write_units: float = 0.0
    loser_write_units: float = 1.0
    scheduler_invocations: int | None = None
    s3_put_requests: int = 0
    s3_get_requests: int = 0

    def __post_init__(self) -> None:
        if self.racers < 1:
            raise ValueError(f"racers must be >= 1, got {self.racers}")
        if self.architecture not in ARCHITECTURES:
            raise ValueError(f"architecture must be one of {ARCHITECTURES}, got {self.architecture!r}")


@dataclass(frozen=True)
class CostEstimate:
    """USD per service for one slot, with the billed quantities behind them and the prices' origin."""

    athena_usd: float
    lambda_usd: float
    dynamodb_usd: float
    scheduler_usd: float
    s3_usd: float
    athena_billed_bytes: int
    lambda_gb_s: float
    lambda_requests: int
    read_units: float
    write_units: float
    prices: Mapping[str, Any]

    @property
    def total_usd(self) -> float:
        return round(
            self.athena_usd + self.lambda_usd + self.dynamodb_usd + self.scheduler_usd + self.s3_usd, USD_DIGITS
        )

    def as_dict(self) -> dict[str, Any]:
        """The stored shape (``cost`` on the result item, the slot's summary and the read API)::

        {"estimated_cost_usd": 5.1e-05, "estimate": true,
         "by_service_usd": {"athena": ..., "lambda": ..., "dynamodb": ..., "scheduler": ..., "s3": ...},
         "usage": {"athena_billed_bytes": ..., "lambda_gb_s": ..., "lambda_requests": ..., "read_units": ...,
                   "write_units": ...},
         "prices": {"region": "us-east-1", "requested_region": "us-east-1", "retrieved": "2026-11-24"}}
        """
        return {
            "estimated_cost_usd": self.total_usd,
            "estimate": True,
            "by_service_usd": {
                "athena": self.athena_usd,
                "lambda": self.lambda_usd,
                "dynamodb": self.dynamodb_usd,
                "scheduler": self.scheduler_usd,
                "s3": self.s3_usd,
            },
            "usage": {
                "athena_billed_bytes": self.athena_billed_bytes,
                "lambda_gb_s": self.lambda_gb_s,
                "lambda_requests": self.lambda_requests,
                "read_units": self.read_units,
                "write_units": self.write_units,
            },
            "prices": dict(self.prices),
        }


def estimate_slot_cost(usage: SlotUsage, prices: Prices) -> CostEstimate:
    """The slot's cost per service from ``usage`` at ``prices`` (see the module docstring for what counts)."""
    billed = sum(athena_billed_bytes(b, min_mb=prices.athena_min_mb_per_query) for b in usage.data_scanned_bytes)
    losers = usage.racers - 1
    gb = usage.memory_mb / 1024
    gb_s = gb * (_billed_ms(usage.winner_billed_ms) + losers * _billed_ms(usage.loser_billed_ms)) / 1000
    requests = usage.racers
    read_units = usage.read_units
    write_units = usage.write_units + losers * usage.loser_write_units
    invocations = usage.racers if usage.scheduler_invocations is None else usage.scheduler_invocations
    return CostEstimate(
        athena_usd=_usd(billed / TB * prices.athena_usd_per_tb_scanned),
        lambda_usd=_usd(
            gb_s * prices.lambda_usd_per_gb_s[usage.architecture]
            + requests / 1e6 * prices.lambda_usd_per_million_requests
        ),
        dynamodb_usd=_usd(
            write_units / 1e6 * prices.dynamodb_usd_per_million_write_units
            + read_units / 1e6 * prices.dynamodb_usd_per_million_read_units
        ),
        scheduler_usd=_usd(invocations / 1e6 * prices.scheduler_usd_per_million_invocations),
        s3_usd=_usd(
            usage.s3_put_requests / 1e3 * prices.s3_usd_per_thousand_put
            + usage.s3_get_requests / 1e3 * prices.s3_usd_per_thousand_get
        ),
        athena_billed_bytes=billed,
        lambda_gb_s=round(gb_s, 6),
        lambda_requests=requests,
        read_units=round(read_units, 6),
        write_units=round(write_units, 6),
        prices=prices.label(),
    )


def _billed_ms(duration_ms: float) -> int:
    """Lambda bills each invocation's duration rounded up to the millisecond (clock noise below 1 ns ignored)."""
    return max(0, math.ceil(round(duration_ms, 6)))


def _usd(value: float) -> float:
    return round(value, USD_DIGITS)


def format_usd(value: float | None) -> str:
    """A USD figure for people: ``$0.000051`` below a cent (slots cost that little), ``$12.3456`` above;
    ``-`` for ``None``."""
    if value is None:
        return "-"
    return f"${value:.6f}" if abs(value) < 0.01 else f"${value:,.4f}"


def commit_write_units(result_writes: Sequence[Mapping[str, Any]], summary_bytes: int) -> int:
    """The fenced commit's write request units, modelled: one transaction of the results store's writes (result
    item, LATEST) each carrying the cost attribute, the slot item (``summary_bytes`` of summary, the cost and its
    own attributes) and the lock item, 2 WRU per started KB of each; plus the slot item's copy in the history
    index (projecting every attribute: 1 WRU per started KB, a plain write).
    https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/transaction-apis.html#transaction-capacity-handling
    https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/GSI.html#GSI.ThroughputConsiderations.Writes
    """
    slot_item_bytes = summary_bytes + COST_ATTRIBUTE_BYTES + SLOT_ITEM_BYTES
    units = estimate_write_units(result_writes, extra_bytes=COST_ATTRIBUTE_BYTES)
    units += 2 * math.ceil(slot_item_bytes / 1024) + 2 * math.ceil(LOCK_ITEM_BYTES / 1024)
    return units + math.ceil(slot_item_bytes / 1024)


class CapacitySource(Protocol):
    """What :class:`InvocationCost` reads DynamoDB consumption from (:class:`slotlock.capacity.CapacityMeter`)."""

    def snapshot(self) -> CapacitySnapshot: ...


class InvocationCost:
    """Measures one invocation for its slot's estimate: started at the invocation's start, told when the lock
    decision came back (:meth:`lock_decided`), asked for the estimate just before the commit (:meth:`estimate`).

    ``capacity``: the lock's meter (consumption since this object was built counts); ``init_ms``: the INIT
    phase this invocation paid for (0 when warm); ``clock_s``: a monotonic clock in seconds.
    """

    def __init__(
        self,
        *,
        prices: Prices,
        racers: int,
        memory_mb: int,
        capacity: CapacitySource,
        architecture: str = "arm64",
        init_ms: float = 0.0,
        clock_s: Callable[[], float] = time.monotonic,
    ) -> None:
        self.prices = prices
        self.racers = racers
        self.memory_mb = memory_mb
        self.architecture = architecture
        self.init_ms = init_ms
        self._capacity = capacity
        self._clock_s = clock_s
        self._started_s = clock_s()
        self._start_capacity = capacity.snapshot()
        self._decision_ms: float | None = None
        self._decision_write_units: float | None = None

    def elapsed_ms(self) -> float:
        return (self._clock_s() - self._started_s) * 1000

    def lock_decided(self) -> None:
        """Record the time to the lock decision and the acquisition's write units (a loser's whole work)."""
        if self._decision_ms is not None:
            return
        self._decision_ms = self.elapsed_ms()
        used = self._capacity.snapshot() - self._start_capacity
        self._decision_write_units = used.write_units if used.unmetered_requests == 0 and used.write_units else None

    def estimate(
        self,
        *,
        data_scanned_bytes: Sequence[int],
        commit_writes: Sequence[Mapping[str, Any]],
        summary_bytes: int,
        s3_put_requests: int = 0,
    ) -> CostEstimate:
        """The slot's estimate now, the commit included by its model (:func:`commit_write_units`: ``commit_writes``
        are the caller's own transaction items, each about to carry the cost attribute; ``summary_bytes`` the
        slot item's summary)."""
        used = self._capacity.snapshot() - self._start_capacity
        commit_units = commit_write_units(commit_writes, summary_bytes)
        decision_ms = self._decision_ms if self._decision_ms is not None else self.elapsed_ms()
        usage = SlotUsage(
            data_scanned_bytes=tuple(data_scanned_bytes),
            winner_billed_ms=self.init_ms + self.elapsed_ms(),
            loser_billed_ms=self.init_ms + decision_ms,
            racers=self.racers,
            memory_mb=self.memory_mb,
            architecture=self.architecture,
            read_units=used.read_units,
            write_units=used.write_units + commit_units,
            loser_write_units=self._decision_write_units or 1.0,
            s3_put_requests=s3_put_requests,
        )
        return estimate_slot_cost(usage, self.prices)
