"""A world clock shared by processes: the wall clock plus an offset kept in a file, so that every process of a local
world (the schedule, the job functions' execution environments, the watchdog) agrees on what time it is, and a test
or an operator can move that time forward to practise what hours of schedules do in seconds.

The file is JSON ``{"offset_ms": N}`` (epoch-ms offset from the wall clock), replaced atomically (``os.replace``) and
read on every reading. No file: offset 0, the wall clock.
Time only moves forward: :meth:`WorldClock.advance` refuses a negative step (leases, deadlines and slot ages are
measured on this clock; going back would let a lease outlive its holder).

An execution environment finds the file in :data:`CLOCK_FILE_ENV` (``local.emulators.lambda_runtime``).
"""

from __future__ import annotations

import datetime as dt
import json
import os
import threading
from pathlib import Path

from slotlock import system_clock_ms

__all__ = ["CLOCK_FILE_ENV", "ClockError", "WorldClock", "clock_from_environment"]

#: The environment variable naming the clock file of the world an execution environment belongs to.
CLOCK_FILE_ENV = "ATHENA_ONCE_WORLD_CLOCK_FILE"


class ClockError(ValueError):
    """A clock file that cannot be read, or a step back in time."""


class WorldClock:
    """Epoch milliseconds: the wall clock plus the offset in ``path`` (every instance on the same file agrees; the
    writes are for one process at a time: the world's, or ``athena-once local clock``). :meth:`now_ms` raises :class:`ClockError` when the file holds no offset."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)

    def offset_ms(self) -> int:
        """The offset from the wall clock (ms); 0 while no file exists. Read on every call (a few microseconds): a
        cache keyed by the file's modification time could miss two writes within its resolution."""
        try:
            text = self.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return 0
        except OSError as exc:
            raise ClockError(f"the world clock {self.path} cannot be read: {exc}") from exc
        try:
            offset = json.loads(text)["offset_ms"]
        except (ValueError, KeyError, TypeError) as exc:
            raise ClockError(f"the world clock {self.path} cannot be read: {exc!r}") from exc
        if not isinstance(offset, int) or isinstance(offset, bool):
            raise ClockError(f"the world clock {self.path}: offset_ms must be an integer, got {offset!r}")
        return offset

    def now_ms(self) -> int:
        """The world's time, epoch milliseconds."""
        return system_clock_ms() + self.offset_ms()

    def now(self) -> dt.datetime:
        """The world's time, an aware UTC datetime."""
        return dt.datetime.fromtimestamp(self.now_ms() / 1000, dt.UTC)

    def _write(self, offset_ms: int) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_name(f".{self.path.name}.{os.getpid()}.{threading.get_ident()}")
        tmp.write_text(json.dumps({"offset_ms": int(offset_ms)}) + "\n", encoding="utf-8")
        os.replace(tmp, self.path)

    def reset(self, epoch_ms: int | None = None) -> None:
        """Start a new world's time: at the wall clock, or at ``epoch_ms`` (any time: nothing runs on it yet)."""
        self._write(0 if epoch_ms is None else int(epoch_ms) - system_clock_ms())

    def advance(self, seconds: float) -> int:
        """Move the world's time ``seconds`` forward; returns the new time (epoch ms).

        :raises ClockError: ``seconds`` is negative."""
        if seconds < 0:
            raise ClockError(f"the world clock only moves forward (asked to move {seconds:g} s)")
        self._write(self.offset_ms() + round(seconds * 1000))
        return self.now_ms()

    def advance_to(self, epoch_ms: int) -> int:
        """Move the world's time forward to ``epoch_ms`` (no step back: an earlier time is refused).

        :raises ClockError: ``epoch_ms`` is before the world's time."""
        now = self.now_ms()
        if epoch_ms < now:
            raise ClockError(f"the world clock only moves forward ({epoch_ms} is {now - epoch_ms} ms ago)")
        self._write(self.offset_ms() + epoch_ms - now)
        return self.now_ms()


def clock_from_environment() -> WorldClock | None:
    """The clock of :data:`CLOCK_FILE_ENV`, or ``None`` (the wall clock) when it is not set."""
    path = os.environ.get(CLOCK_FILE_ENV, "").strip()
    return WorldClock(Path(path)) if path else None
