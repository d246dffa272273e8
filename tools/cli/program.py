"""The program name a command's usage and help print: ``athena-once ops`` when run as a subcommand of the one
command, the alias's own (``python -m tools.ops``) otherwise. A context variable, so that no command's ``main``
signature changes for it. And how an alias exits (:func:`exit_with`)."""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from typing import NoReturn

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


def until_broken_pipe(main: Callable[[], int]) -> int:
    """``main()``'s status, stdout flushed; when the reader of stdout left (``... | head``), nothing more is said
    (no traceback, nothing at exit) and the status is 1."""
    try:
        status = main()
        sys.stdout.flush()
    except BrokenPipeError:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
    return status


def exit_with(main: Callable[[], int]) -> NoReturn:
    """A ``python -m`` alias's body: exit with :func:`until_broken_pipe` of ``main``."""
    sys.exit(until_broken_pipe(main))
