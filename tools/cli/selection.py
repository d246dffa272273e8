"""``-s/--select``: which jobs a command acts on, one syntax for every command.

A selection is one or more patterns, given as repeated options and/or separated by commas or spaces within one
(``-s "a b"``, ``-s a,b``, ``-s a -s b``). A pattern is a job name or a glob (``fnmatch``: ``*``, ``?``,
``[seq]``); a job is selected if it matches ANY pattern: a union. dbt reads a comma as an intersection
(https://docs.getdbt.com/reference/node-selection/set-operators); this command does not, and says so in its help.
``--job NAME`` is the same option under its older name.

A pattern that matches no job is an error naming it, with the closest names ("did you mean") and the jobs there are:
a typo never silently selects nothing.
"""

from __future__ import annotations

import argparse
import difflib
import fnmatch
import re
from collections.abc import Iterable, Sequence

SELECT_HELP = (
    "jobs by name or glob (e.g. 'daily-*'), separated by commas or spaces, repeatable; a job matching any is"
    " selected (a union: a comma is not dbt's intersection); --job is the same option"
)
_SEPARATORS = re.compile(r"[,\s]+")


class SelectionError(ValueError):
    """A selection that cannot be applied: a pattern matching no job, or several jobs where one is needed."""


def add_select_argument(
    parser: argparse.ArgumentParser, *, required: bool = False, one: bool = False, help: str | None = None
) -> None:
    """Add ``-s/--select`` (alias ``--job``) to ``parser``: ``args.select`` is a list of the raw option values
    (``[]`` when absent). ``one``: the command acts on exactly one job (its help says so)."""
    text = help or ("the job (its folder's name under jobs/, or a glob matching exactly one)" if one else SELECT_HELP)
    parser.add_argument(
        "-s",
        "--select",
        "--job",
        dest="select",
        action="append",
        default=[],
        required=required,
        metavar="JOB",
        help=text,
    )


def patterns(values: Iterable[str]) -> tuple[str, ...]:
    """The patterns of raw option values, split on commas and whitespace, empty parts dropped, first-seen order."""
    found: dict[str, None] = {}
    for value in values:
        for part in _SEPARATORS.split(value.strip()):
            if part:
                found[part] = None
    return tuple(found)


def select(values: Sequence[str], names: Sequence[str], *, where: str | None = None) -> tuple[str, ...]:
    """The names (in ``names``' order) matching any pattern of ``values``; every name when ``values`` holds none.

    :raises SelectionError: a pattern matches no name: one line per such pattern, ``no job 'x'; jobs: a, b`` (with
        ``(did you mean 'y'?)`` when a name is close; ``no job matches 'x*'`` for a glob; ``no job 'x' in <where>;``
        when ``where`` names the folder).
    """
    wanted = patterns(values)
    if not wanted:
        return tuple(names)
    unmatched = [p for p in wanted if not any(fnmatch.fnmatchcase(name, p) for name in names)]
    if unmatched:
        raise SelectionError("\n".join(_no_match(p, names, where) for p in unmatched))
    return tuple(name for name in names if any(fnmatch.fnmatchcase(name, p) for p in wanted))


def select_one(values: Sequence[str], names: Sequence[str], *, option: str = "-s/--select") -> str:
    """The one name the selection matches.

    :raises SelectionError: it matches none (see :func:`select`) or several (the message lists them).
    """
    chosen = select(values, names) if patterns(values) else ()
    if len(chosen) != 1:
        raise SelectionError(
            f"{option}: this command takes one job; "
            + (f"{' '.join(values)!r} matches {len(chosen)}: {', '.join(chosen)}" if chosen else "none was named")
        )
    return chosen[0]


def _no_match(pattern: str, names: Sequence[str], where: str | None = None) -> str:
    close = difflib.get_close_matches(pattern, names, n=3, cutoff=0.6)
    hint = f" (did you mean {' or '.join(repr(c) for c in close)}?)" if close else ""
    what = f"matches {pattern!r}" if is_glob(pattern) else repr(pattern)
    place = f" in {where}" if where else ""
    return f"no job {what}{place}{hint}; jobs: {', '.join(names) or 'none'}"


def is_glob(pattern: str) -> bool:
    """Whether ``pattern`` is a glob (holds ``*``, ``?`` or ``[``) rather than a job's name."""
    return any(c in pattern for c in "*?[")


def plain_name(wanted: Sequence[str]) -> str | None:
    """The one job name of a selection of one pattern that is no glob (``None`` otherwise): a command may then
    read that one job only."""
    return wanted[0] if len(wanted) == 1 and not is_glob(wanted[0]) else None
