"""The value checks every settings block uses (a job's :class:`~athena_refresh.jobspec.JobSpec`, the stack-wide
``stacks.stack_settings.StackSettings``), and how their problems are reported.

A check takes a raw value and returns it normalized, or raises :class:`Invalid` whose text says what is allowed
("an integer from 1 to 20"); the caller words the message, naming its file or context key:
``context stack.capacity.permits: must be an integer from 0 to 99 (...), got 100``. An object-valued key
(:func:`object_of`) raises :class:`InvalidKeys` with one ``(sub key, message)`` pair per problem, nested keys
dotted (``capacity.permits``). Every problem of a block is collected into one :class:`ConfigError`.

Standard library only (it ships in the Lambda asset: the cold start runs the same checks as synth); no AWS call,
no environment variable: the bounds come from the callers (and :mod:`athena_refresh.contract`). ``stacks/`` and
``tools/`` import it directly.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import MISSING, dataclass, field
from typing import Any

from . import contract
from .assertions import ExpressionError
from .assertions import parse as parse_row_expression

GLUE_NAME = re.compile(r"[a-z0-9_]{1,255}")  # Athena/Glue: lowercase letters, digits, underscore
GLUE_NAME_RULE = "1 to 255 lowercase letters, digits or '_' (a Glue/Athena name)"
# An Athena workgroup's name: CreateWorkGroup's Name, pattern [a-zA-Z0-9._-]{1,128}
# (https://docs.aws.amazon.com/athena/latest/APIReference/API_CreateWorkGroup.html).
WORKGROUP_NAME = re.compile(r"[A-Za-z0-9._-]{1,128}")
WORKGROUP_NAME_RULE = "1 to 128 letters, digits, '.', '-' or '_'"
REMOVAL_POLICIES = ("RETAIN", "DESTROY")
_EMAIL = re.compile(r"[^@\s]+@[^@\s]+\.[^@\s]+")


class ConfigError(ValueError):
    """The CDK context is invalid. ``problems`` holds one message per offending key."""

    def __init__(self, problems: Sequence[str]) -> None:
        self.problems = tuple(problems)
        super().__init__("\n".join(self.problems))

    def lines(self) -> str:
        """The problems as entry points print them (:func:`format_problems`)."""
        return format_problems(self.problems)


def format_problems(problems: Iterable[str]) -> str:
    """One problem per line, in order, without repeats (a team default broken for several jobs is one line),
    ``jobs/<job>/job.toml:<line>: key: problem``: what ``app.py``, ``python -m tools.jobs`` and the other
    entry points print to stderr (no traceback) before exiting with status 2."""
    return "\n".join(dict.fromkeys(problems))


@dataclass(frozen=True)
class Labels:
    """How problems name a key: ``at(key)`` starts a message, ``ref(key)`` names another key inside one.

    cdk.json's job block reads ``context job.racers: ...``; a job file ``jobs/<job>/job.toml: racers: ...``.
    """

    prefix: str
    ref_prefix: str = ""
    #: Where a (dotted) key's value came from, when not from ``prefix``'s file: key -> (location, note), e.g.
    #: ``("jobs/x/job.toml:7", "")`` or ``("jobs/x/job.toml", " (not set; derived: one period)")``.
    where: Mapping[str, tuple[str, str]] = field(default_factory=dict)

    def at(self, key: str) -> str:
        for name in (key, key.split(".")[0]):
            if name in self.where:
                location, note = self.where[name]
                return f"{location}: {key}{note}"
        return f"{self.prefix}{key}"

    def ref(self, key: str) -> str:
        return f"{self.ref_prefix}{key}"


class Invalid(Exception):
    """One value failed its check; the message says what is allowed."""


class InvalidKeys(Exception):
    """An object-valued key has problems in its own keys: ``(sub key, message)`` pairs (nested keys dotted)."""

    def __init__(self, problems: Sequence[tuple[str, str]]) -> None:
        self.problems = list(problems)
        super().__init__("; ".join(f"{key}: {message}" for key, message in problems))


# --- value checks: each returns the normalized value or raises Invalid(allowed-values text) ----------


def integer(lo: int, hi: int, why: str = "") -> Callable[[Any], int]:
    """An integer from ``lo`` to ``hi`` (both inclusive: every number has both bounds); ``why`` explains them."""
    allowed = f"an integer from {lo} to {hi}" + (f" ({why})" if why else "")

    def check(value: Any) -> int:
        # bool is an int subclass; a float (even 3.0) or a string is a typo worth reporting.
        if isinstance(value, bool) or not isinstance(value, int):
            raise Invalid(allowed)
        if not lo <= value <= hi:
            raise Invalid(allowed)
        return value

    return check


def boolean(value: Any) -> bool:
    """``true`` or ``false`` (a TOML or JSON boolean; ``1``, ``"yes"`` are typos worth reporting)."""
    if not isinstance(value, bool):
        raise Invalid("true or false")
    return value


def bounded(variable: str, why: str = "") -> Callable[[Any], int]:
    """The integer check of a key whose runtime variable has bounds in ``contract.NUMERIC_BOUNDS``.

    The runtime reads some of them as fractional seconds; cdk.json takes whole numbers, so the key allows
    the integers inside the runtime's range.
    """
    lo, hi = contract.NUMERIC_BOUNDS[variable]
    return integer(math.ceil(lo), math.floor(hi), why)


def bounded_number(variable: str, why: str = "") -> Callable[[Any], float]:
    """A finite number (an integer or a fraction; not a bool) within the bounds of ``variable`` in
    ``contract.NUMERIC_BOUNDS``, returned as a float: the seconds the runtime reads with a fraction (a local run's
    short waits), where cdk.json takes the integers inside the same range (:func:`bounded`)."""
    lo, hi = contract.NUMERIC_BOUNDS[variable]
    allowed = f"a number from {bound_text(lo)} to {bound_text(hi)}" + (f" ({why})" if why else "")

    def check(value: Any) -> float:
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise Invalid(allowed)
        if isinstance(value, float) and not math.isfinite(value):
            raise Invalid(allowed)
        if not lo <= value <= hi:
            raise Invalid(allowed)
        return float(value)

    return check


def bound_text(bound: float) -> str:
    """A bound as the messages write it: ``60`` for 60.0, ``0.1`` as is."""
    return str(int(bound)) if float(bound).is_integer() else str(bound)


def named(pattern: re.Pattern[str], allowed: str) -> Callable[[Any], str]:
    """A string matching ``pattern`` in full; ``allowed`` says what that is in words."""

    def check(value: Any) -> str:
        if not isinstance(value, str) or not pattern.fullmatch(value):
            raise Invalid(allowed)
        return value

    return check


def one_of(choices: Sequence[str]) -> Callable[[Any], str]:
    """One of ``choices`` (upper case), in any case."""
    allowed = "one of " + ", ".join(choices)

    def check(value: Any) -> str:
        if not isinstance(value, str) or value.upper() not in choices:
            raise Invalid(allowed)
        return value.upper()

    return check


def optional(check: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """``check``, or ``None`` for null or an empty string."""

    def optional_check(value: Any) -> Any:
        if value is None or value == "":
            return None
        return check(value)

    return optional_check


def distinct_list(item: Callable[[Any], Any], items: str, *, max_items: int) -> Callable[[Any], tuple[Any, ...]]:
    """A JSON array of at most ``max_items`` distinct values, each passing ``item`` (``items`` names them in words,
    with the rule each must follow); null is the empty list. Returns them as a tuple, in order."""
    allowed = f"a list of at most {max_items} distinct {items}"

    def check(value: Any) -> tuple[Any, ...]:
        if value is None:
            return ()
        if not isinstance(value, list) or len(value) > max_items:
            raise Invalid(allowed)
        found: list[Any] = []
        for entry in value:
            try:
                found.append(item(entry))
            except Invalid:
                raise Invalid(f"{allowed} ({entry!r} is not one)") from None
        repeated = sorted({repr(entry) for entry in found if found.count(entry) > 1})
        if repeated:
            raise Invalid(f"{allowed} ({', '.join(repeated)} repeated)")
        return tuple(found)

    return check


def email(value: Any) -> str:
    if not isinstance(value, str) or not _EMAIL.fullmatch(value):
        raise Invalid("an email address (or null for no subscription)")
    return value


def object_of(
    checks: Mapping[str, tuple[Callable[[Any], Any], Any]], build: Callable[..., Any]
) -> Callable[[Any], Any]:
    """Check an object-valued key: each sub key with its check, ``MISSING`` default = required; then
    ``build(**values)``, which may raise :class:`InvalidKeys` itself (a rule between its keys).

    A sub key that is an object itself reports its own keys dotted (``capacity.permits``).
    """

    def check(value: Any) -> Any:
        if not isinstance(value, Mapping):
            raise Invalid(f"an object with keys {', '.join(checks)}")
        problems: list[tuple[str, str]] = []
        for key in sorted(set(value) - set(checks)):
            problems.append((key, f"unknown key; allowed keys: {', '.join(checks)}"))
        values: dict[str, Any] = {}
        for key, (sub_check, default) in checks.items():
            if key not in value:
                if default is MISSING:
                    problems.append((key, "missing; required"))
                else:
                    values[key] = default
                continue
            try:
                values[key] = sub_check(value[key])
            except Invalid as exc:
                problems.append((key, f"must be {exc}, got {value[key]!r}"))
            except InvalidKeys as exc:
                problems.extend((f"{key}.{sub}", message) for sub, message in exc.problems)
        if problems:
            raise InvalidKeys(problems)
        return build(**values)

    return check


# --- the [assertions] table (athena_refresh/assertions.py) ---------------------------------------------------
#: An Athena result column name (lowercase).
RESULT_COLUMN = re.compile(r"[a-z_][a-z0-9_]{0,254}")


def accepted_values(value: Any) -> dict[str, tuple[Any, ...]]:
    """The ``[assertions]`` table's ``accepted_values`` (athena_refresh/assertions.py)."""
    allowed = "a table of column = [values] (text, numbers or booleans), at most 100 values each"
    if not isinstance(value, Mapping) or not all(isinstance(k, str) and RESULT_COLUMN.fullmatch(k) for k in value):
        raise Invalid(allowed)
    checked: dict[str, tuple[Any, ...]] = {}
    for column, values in value.items():
        if not isinstance(values, list | tuple) or not 1 <= len(values) <= 100:
            raise Invalid(allowed)
        if not all(isinstance(v, str | int | float | bool) for v in values):
            raise Invalid(allowed)
        checked[column] = tuple(values)
    return checked


def row_expressions(value: Any) -> tuple[str, ...]:
    """The ``[assertions]`` table's ``expressions``, each parsed by :func:`athena_refresh.assertions.parse`."""
    allowed = "a list of at most 20 row expressions (SQL predicates on the result's columns)"
    if not isinstance(value, list | tuple) or len(value) > 20 or not all(isinstance(v, str) for v in value):
        raise Invalid(allowed)
    for text in value:
        try:
            parse_row_expression(text)
        except ExpressionError as exc:
            raise Invalid(f"a row expression (athena_refresh/assertions.py); {exc}") from exc
    return tuple(value)
