"""The price table: AWS list prices as data (``prices.toml``, beside this module in the Lambda asset), read with
:mod:`tomllib` into one region's :class:`Prices`. Each service's table gives its ``source`` (the pricing page) and
each region the date its prices were ``retrieved``. The arithmetic from usage to USD is :mod:`athena_refresh.cost`.

Units: TB = 2^40 bytes, MB = 2^20 bytes; GB-second = memory in GB (MB / 1024) x billed seconds.
"""

from __future__ import annotations

import functools
import math
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from .errors import ConfigurationError

__all__ = ["ARCHITECTURES", "MB", "PRICES_PATH", "TB", "PriceTableError", "Prices", "load_prices"]

PRICES_PATH: Final = Path(__file__).resolve().with_name("prices.toml")
MB: Final = 2**20
TB: Final = 2**40
PRICE_TABLE_FORMAT: Final = 1
#: Lambda architectures the table prices (``lambda.usd_per_gb_s_<architecture>``).
ARCHITECTURES: Final = ("arm64", "x86_64")


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
    cloudwatch_usd_per_gb_logs_insights_scanned: float
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
    ("cloudwatch", "usd_per_gb_logs_insights_scanned"): "cloudwatch_usd_per_gb_logs_insights_scanned",
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
