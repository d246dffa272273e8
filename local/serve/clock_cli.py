"""``athena-once local clock``: the running local world's time, and moving it forward.

The world's schedules, its job functions and its freshness watchdog all read the world's clock
(:class:`local.emulators.clock.WorldClock`, the file named in the world file), so ``--advance-s 3600`` makes an hour
of firings due at once: the schedules fire what became due (each firing once: a jump past several firings of a job
fires the first and then the next after the new time, as a Scheduler that was unavailable), the watchdog judges the
jobs at the new time, and ``ops --local`` reads the same time. Time only moves forward.

Exit status: 0; 1 no world is running (the line says how to start one) or the clock cannot be read; 2 a usage error.
"""

from __future__ import annotations

import argparse
import datetime as dt
import sys
from pathlib import Path

from tools.cli.program import prog


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog=prog("python -m local.serve.clock_cli"), description=(__doc__ or "").splitlines()[0]
    )
    parser.add_argument(
        "--advance-s",
        type=int,
        default=0,
        metavar="SECONDS",
        help="move the world's time this many seconds forward (at least 0; default: only print it)",
    )
    args = parser.parse_args(argv)
    if args.advance_s < 0:
        parser.error(f"--advance-s: the world's clock only moves forward, got {args.advance_s}")
    from local.emulators.clock import ClockError, WorldClock
    from local.serve.world import WorldError, open_world

    try:
        world = open_world()
        if world.clock_file is None:
            raise WorldError(f"the world of {world.path} has no clock (a world of an older version): restart it")
        clock = WorldClock(Path(world.clock_file))
        now_ms = clock.advance(args.advance_s) if args.advance_s else clock.now_ms()
    except (WorldError, ClockError) as exc:
        print(f"refused: {exc}", file=sys.stderr)
        return 1
    now = dt.datetime.fromtimestamp(now_ms / 1000, dt.UTC)
    ahead_s = round(clock.offset_ms() / 1000)
    print(f"the world's time: {now:%Y-%m-%dT%H:%M:%SZ} ({ahead_s:+d} s from the wall clock)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
