"""The deployment's Athena capacity budget (issue 24, docs/protocol.md#capacity-semaphore) as the runtime holds it:
its numbers, :class:`CapacityBudget` (validated once by its construction, carried by the job catalog as typed JSON),
and their wiring, :class:`CapacitySettings` (the budget plus the names the stack sets in the environment).

The numbers (permits, the wait in place, the manual headroom, the retry delay, the longest active query) are
settings, not wiring: the stack validates cdk.json's ``context.stack.capacity`` at synth
(``stacks.stack_settings.CapacitySettings``) and writes its :meth:`CapacityBudget.as_raw` into every job's catalog
(the catalog's ``capacity`` section, :mod:`athena_refresh.catalog`), and the cold start loads it back into the same
class: the same rules run, no text is parsed. The environment carries only the budget's wiring
(``contract.CAPACITY_ENV_VARS``: the semaphore's name, whose default ``<account>-<region>`` is known at deploy time
only, the table holding the permits, and the deferral's role, group and name prefix); a number set there is
refused (``contract.CAPACITY_SETTING_ENV_VARS``).

Standard library only (it ships in the Lambda asset; ``stacks/`` imports it).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields
from typing import Any, Final

from slotlock import table as lock_table

from . import contract
from .checks import ConfigError, Invalid, Labels, bounded, bounded_number
from .errors import ConfigurationError

#: The catalog's key (and the prefix of every problem's key) of the budget.
CAPACITY_KEY: Final = "capacity"
#: The semaphore's name when none is set (the stack always sets ``<account>-<region>`` or cdk.json's name).
DEFAULT_SEMAPHORE_NAME: Final = "athena"
#: How the budget's problems name its keys: ``capacity.permits: ...``.
LABELS: Final = Labels(f"{CAPACITY_KEY}.")


def headroom_problem(permits: int, headroom: int) -> str | None:
    """The one rule between the budget's keys, or ``None`` when it holds: while the budget is on (``permits`` > 0)
    ``manual_headroom`` is below ``permits`` (a manual run takes a permit only while more than the headroom are
    free). The message a cdk.json key and a catalog key both carry."""
    if permits > 0 and not headroom < permits:
        return (
            f"must be below permits ({permits}) while the budget is on: a manual run takes a permit only while more "
            f"than manual_headroom are free, so {headroom} would block every manual run, got {headroom}"
        )
    return None


@dataclass(frozen=True, kw_only=True)
class CapacityBudget:
    """The budget's numbers, units in the names: ``permits`` (0: off, no semaphore request; at most 99),
    ``wait_in_place_s`` (the longest wait for a permit inside one invocation, 0 to 900 s), ``manual_headroom``
    (permits a rerun or backfill leaves free for the live schedule, below ``permits`` while on), ``retry_delay_s``
    (when a slot given back comes back, 60 to 3600 s: Scheduler's one-time schedules have minute granularity),
    ``max_query_active_s`` (the longest a query stays active, the workgroup's DML query timeout, 60 to 14,400 s: a
    taken permit naming no query stays counted this long past its expiry). Bounds: ``contract.NUMERIC_BOUNDS``.

    The defaults are the budget off (``CapacityBudget()``): what a catalog without a ``capacity`` section means.
    Constructing one checks every key and the headroom rule.

    :raises ConfigError: one problem per key, ``capacity.permits: must be an integer from 0 to 99 (...), got 100``.
    """

    permits: int = 0
    wait_in_place_s: float = float(contract.DEFAULT_CAPACITY_WAIT_IN_PLACE_S)
    manual_headroom: int = 0
    retry_delay_s: float = float(contract.DEFAULT_CAPACITY_RETRY_DELAY_S)
    max_query_active_s: float = float(contract.DEFAULT_CAPACITY_MAX_QUERY_ACTIVE_S)

    def __post_init__(self) -> None:
        values, problems = _checked({f.name: getattr(self, f.name) for f in fields(self)}, LABELS)
        if problems:
            raise ConfigError(problems)
        for name, value in values.items():
            object.__setattr__(self, name, value)  # normalized: seconds as floats

    @property
    def enabled(self) -> bool:
        """Whether the budget is on (``permits`` > 0)."""
        return self.permits > 0

    @classmethod
    def from_raw(cls, raw: Any, *, labels: Labels = LABELS) -> CapacityBudget:
        """The budget of a raw mapping (the catalog's ``capacity`` section): every key required (the stack writes
        them all), none unknown. :raises ConfigError: naming each problem through ``labels``."""
        if not isinstance(raw, Mapping):
            raise ConfigError([f"{labels.prefix.rstrip('.')}: must be an object with keys {', '.join(_CHECKS)}"])
        problems = [
            f"{labels.at(key)}: unknown key; allowed keys: {', '.join(_CHECKS)}"
            for key in sorted(set(raw) - set(_CHECKS))
        ]
        problems += [f"{labels.at(key)}: missing; required" for key in _CHECKS if key not in raw]
        values, value_problems = _checked({key: raw[key] for key in _CHECKS if key in raw}, labels)
        problems += value_problems
        if problems:
            raise ConfigError(problems)
        return cls(**values)

    def as_raw(self) -> dict[str, Any]:
        """The budget as plain data: the catalog's ``capacity`` section, which :meth:`from_raw` reads back."""
        return {f.name: getattr(self, f.name) for f in fields(self)}


def _checked(raw: Mapping[str, Any], labels: Labels) -> tuple[dict[str, Any], list[str]]:
    """Each key of ``raw`` on its own, then the headroom rule when both of its keys passed."""
    values: dict[str, Any] = {}
    problems: list[str] = []
    for key, value in raw.items():
        try:
            values[key] = _CHECKS[key](value)
        except Invalid as exc:
            problems.append(f"{labels.at(key)}: must be {exc}, got {value!r}")
    if "permits" in values and "manual_headroom" in values:
        problem = headroom_problem(values["permits"], values["manual_headroom"])
        if problem:
            problems.append(f"{labels.at('manual_headroom')}: {problem}")
    return values, problems


_CHECKS: dict[str, Callable[[Any], Any]] = {
    "permits": bounded(contract.ENV_CAPACITY_PERMITS, "0: off"),
    "wait_in_place_s": bounded_number(contract.ENV_CAPACITY_WAIT_IN_PLACE_S, "seconds"),
    "manual_headroom": bounded(contract.ENV_CAPACITY_MANUAL_HEADROOM),
    "retry_delay_s": bounded_number(contract.ENV_CAPACITY_RETRY_DELAY_S, "seconds"),
    "max_query_active_s": bounded_number(contract.ENV_CAPACITY_MAX_QUERY_ACTIVE_S, "seconds"),
}
if list(_CHECKS) != [f.name for f in fields(CapacityBudget)]:  # pragma: no cover - a programming error
    raise RuntimeError("CapacityBudget's fields and _CHECKS must name the same keys in the same order")


@dataclass(frozen=True)
class CapacitySettings:
    """The budget of one function: its numbers (:class:`CapacityBudget`, from the catalog) and its wiring (from the
    environment). Build with :meth:`of` (the deployed shape); direct construction is for tests.

    ``permits`` 0: off (no semaphore request at all). ``semaphore_name``: shared by every deployment that shares
    the budget; ``table_name``: the table holding its permits (``None``: this deployment's lock table; another
    deployment's lock table to share that deployment's budget). ``wait_in_place_s``, ``manual_headroom``,
    ``retry_delay_s``, ``max_query_active_s``: the budget's numbers (:class:`CapacityBudget`). ``deferral_*``: the
    one-time schedule's role, group and name prefix (``None`` role: no deferral; the wait then ends the invocation
    with a retryable error, for local tools only: the stack always sets them).
    """

    permits: int = 0
    semaphore_name: str = ""
    table_name: str | None = None
    wait_in_place_s: float = float(contract.DEFAULT_CAPACITY_WAIT_IN_PLACE_S)
    manual_headroom: int = 0
    retry_delay_s: float = float(contract.DEFAULT_CAPACITY_RETRY_DELAY_S)
    max_query_active_s: float = float(contract.DEFAULT_CAPACITY_MAX_QUERY_ACTIVE_S)
    deferral_role_arn: str | None = None
    deferral_schedule_group: str = "default"
    deferral_schedule_prefix: str = ""

    @property
    def enabled(self) -> bool:
        return self.permits > 0

    @classmethod
    def of(cls, budget: CapacityBudget, env: Mapping[str, str]) -> CapacitySettings:
        """``budget``'s numbers with the wiring of ``env`` (``contract.CAPACITY_ENV_VARS``); the budget off: the
        defaults (nothing of the wiring is read). :raises ConfigurationError: naming the variable (a semaphore name
        that is not :data:`slotlock.table.SEMAPHORE_NAME_RULE`)."""
        if not budget.enabled:
            return cls()
        name = env.get(contract.ENV_CAPACITY_SEMAPHORE_NAME, "").strip() or DEFAULT_SEMAPHORE_NAME
        if not lock_table.SEMAPHORE_NAME_PATTERN.fullmatch(name):
            raise ConfigurationError(
                contract.ENV_CAPACITY_SEMAPHORE_NAME, f"must be {lock_table.SEMAPHORE_NAME_RULE}, got {name!r:.80}"
            )
        return cls(
            permits=budget.permits,
            semaphore_name=name,
            table_name=env.get(contract.ENV_CAPACITY_TABLE_NAME, "").strip() or None,
            wait_in_place_s=budget.wait_in_place_s,
            manual_headroom=budget.manual_headroom,
            retry_delay_s=budget.retry_delay_s,
            max_query_active_s=budget.max_query_active_s,
            deferral_role_arn=env.get(contract.ENV_DEFERRAL_ROLE_ARN, "").strip() or None,
            deferral_schedule_group=env.get(contract.ENV_DEFERRAL_SCHEDULE_GROUP, "").strip() or "default",
            deferral_schedule_prefix=env.get(contract.ENV_DEFERRAL_SCHEDULE_PREFIX, "").strip(),
        )
