"""The program name a command's usage and help print: ``athena-once ops`` when run as a subcommand of the one
command, the alias's own (``python -m tools.ops``) otherwise. A context variable, so that no command's ``main``
signature changes for it."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from contextvars import ContextVar

_PROG: ContextVar[str | None] = ContextVar("athena_once_prog", default=None)


def prog(default: str) -> str:
    """The name to put in usage lines: the one command's (set by :func:`invoked_as`), else ``default``."""
    return _PROG.get() or default


@contextlib.contextmanager
def invoked_as(name: str) -> Iterator[None]:
    """Within the block, :func:`prog` answers ``name`` (e.g. ``athena-once local demo``)."""
    token = _PROG.set(name)
    try:
        yield
    finally:
        _PROG.reset(token)
