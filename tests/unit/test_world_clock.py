"""The local world's clock (``local.emulators.clock``): shared through a file, forward only."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from local.emulators.clock import CLOCK_FILE_ENV, ClockError, WorldClock, clock_from_environment


def test_instances_on_one_file_agree_and_time_only_moves_forward(tmp_path: Path) -> None:
    path = tmp_path / "world" / "clock.json"
    first, second = WorldClock(path), WorldClock(path)
    assert first.offset_ms() == 0  # no file: the wall clock
    wall_ms = time.time_ns() // 1_000_000
    first.reset(wall_ms + 3_600_000)
    assert abs(second.offset_ms() - 3_600_000) < 5_000
    moved = second.advance(900)
    assert abs(first.now_ms() - moved) < 5_000 and first.offset_ms() == second.offset_ms()
    target = first.now_ms() + 60_000
    assert first.advance_to(target) >= target
    with pytest.raises(ClockError, match="only moves forward"):
        first.advance(-1)
    with pytest.raises(ClockError, match="only moves forward"):
        first.advance_to(target - 600_000)
    assert first.now().tzinfo is not None


def test_a_clock_file_that_holds_no_offset_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "clock.json"
    path.write_text('{"offset_ms": "soon"}')
    with pytest.raises(ClockError, match="offset_ms must be an integer"):
        WorldClock(path).now_ms()
    path.write_text("{")
    with pytest.raises(ClockError, match="cannot be read"):
        WorldClock(path).now_ms()
    monkeypatch.delenv(CLOCK_FILE_ENV, raising=False)
    assert clock_from_environment() is None
    monkeypatch.setenv(CLOCK_FILE_ENV, str(path))
    clock = clock_from_environment()
    assert clock is not None and clock.path == path
