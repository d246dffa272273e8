"""``python -m local.demo``: the command line of the demo (:mod:`local.demo.runner`).

python -m local.demo [--job NAME ...] [--slots K] [--racers N] [--lease-s S] [--no-faults] [--report PATH]
                     [--workdir .demo] [--jobs-dir jobs]

Exit status: 0 every check passed (a job whose query failed is not a failed check: its FAILED slots, recorded once,
are counted in ``slots_failed`` and named with their reason); 1 a check failed (listed after ``FAILED:``); 2 bad arguments (a ``--job`` with no
folder: one ``error:`` line listing the jobs there are), or the demo could
not run: an environment problem (the moto server or the execution environments did not start, a work directory
that cannot be written, the sample data that cannot be built), one ``the demo could not run:`` line on stderr
(:mod:`local.emulators.environment`); 130 interrupted.
"""

from __future__ import annotations

import argparse
import atexit
import contextlib
import signal
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from athena_refresh.checks import ConfigError, format_problems
from local.demo import runner
from local.demo.plan import (
    DEFAULT_LEASE_S,
    DEFAULT_QUERY_MS,
    DEFAULT_RACERS,
    DEFAULT_SLOTS,
    REPO_ROOT,
    DemoOptions,
    NoLocalDataError,
)
from local.demo.runner import Demo, UnknownJobError
from local.emulators.environment import LOCAL_RUN_ERRORS, describe
from tools.cli.program import prog
from tools.cli.selection import SELECT_HELP, add_select_argument, patterns


def _positive_float(text: str) -> float:
    value = float(text)
    if value < 2:
        raise argparse.ArgumentTypeError("must be at least 2 seconds")
    return value


def _count(limit: int) -> Callable[[str], int]:
    def parse(text: str) -> int:
        value = int(text)
        if not 1 <= value <= limit:
            raise argparse.ArgumentTypeError(f"must be from 1 to {limit}")
        return value

    return parse


def parse_args(argv: list[str] | None) -> DemoOptions:
    parser = argparse.ArgumentParser(
        prog=prog("python -m local.demo"), description=(runner.__doc__ or "").splitlines()[0]
    )
    parser.add_argument(
        "--slots", type=_count(48), default=DEFAULT_SLOTS, help="schedule slots K of each job (default %(default)s)"
    )
    parser.add_argument(
        "--racers", type=_count(20), default=DEFAULT_RACERS, help="racers N per slot (default %(default)s)"
    )
    parser.add_argument(
        "--lease-s",
        type=_positive_float,
        default=DEFAULT_LEASE_S,
        help="lease duration in seconds; heartbeat is a quarter of it (default %(default)s)",
    )
    add_select_argument(parser, help=f"run only these jobs (default: every folder under --jobs-dir); {SELECT_HELP}")
    parser.add_argument("--no-faults", action="store_true", help="no kill, no pause")
    parser.add_argument("--report", type=Path, default=REPO_ROOT / "demo-report.json", help="default: %(default)s")
    parser.add_argument(
        "--workdir", type=Path, default=REPO_ROOT / ".demo", help="engine state and logs (default: %(default)s)"
    )
    parser.add_argument(
        "--query-ms",
        type=int,
        default=DEFAULT_QUERY_MS,
        help="how long each query appears running (default %(default)s)",
    )
    parser.add_argument("--seed", type=int, default=13, help="racer-to-environment shuffling (default %(default)s)")
    parser.add_argument(
        "--parallel-jobs",
        type=_count(1000),
        default=None,
        metavar="J",
        help="run J jobs at once, in batches (default: as many as this machine's cores and memory carry)",
    )
    parser.add_argument(
        "--jobs-dir", type=Path, default=REPO_ROOT / "jobs", help="the job folders (default: %(default)s)"
    )
    args = parser.parse_args(argv)
    return DemoOptions(
        slots=args.slots,
        racers=args.racers,
        lease_s=args.lease_s,
        faults=not args.no_faults,
        report=args.report.resolve(),
        workdir=args.workdir.resolve(),
        query_ms=max(0, args.query_ms),
        seed=args.seed,
        jobs=patterns(args.select),
        jobs_dir=args.jobs_dir.resolve(),
        parallel_jobs=args.parallel_jobs or 0,
    )


def _cannot_run(exc: BaseException) -> int:
    print(f"the demo could not run: {describe(exc)}", file=sys.stderr, flush=True)
    return 2


def main(argv: list[str] | None = None) -> int:
    options = parse_args(argv)
    try:
        demo = Demo(options)  # reads the job folders
    except UnknownJobError as exc:
        print(f"error: -s/--select: {exc}", file=sys.stderr, flush=True)
        return 2
    except NoLocalDataError as exc:  # every selected job reads its own table and has no sample files
        print(f"the demo could not run: {exc}", file=sys.stderr, flush=True)
        return 2
    except ConfigError as exc:  # the job folders: every problem on its own line, as synth prints them
        print(format_problems(exc.problems), file=sys.stderr, flush=True)
        return 2
    except LOCAL_RUN_ERRORS as exc:
        return _cannot_run(exc)
    atexit.register(demo.close)
    previous: dict[int, Any] = {}
    if threading.current_thread() is threading.main_thread():
        for signum in (signal.SIGINT, signal.SIGTERM):
            previous[signum] = signal.signal(signum, demo.request_stop)
    try:
        demo.setup()
        demo.say(f"set-up done in {demo.setup_s:.1f} s")
        demo.run()
        totals = demo.verify()
        demo.save_store()  # whatever the verdict: the run got as far as its commits
        demo.print_tables(totals)
        report = demo.report(totals)
        demo.out("")
        demo.out(
            f"run {demo.run_s:.1f} s after {demo.setup_s:.1f} s of set-up; report: {demo.rel(options.report)};"
            f" environment logs: {demo.rel(demo.logs_dir)}/"
        )
        if report["ok"]:
            demo.out(
                f"OK: {totals['slots_completed']}/{totals['slots']} slots committed exactly once, no duplicate"
                f" commit, {totals['stale_writes_rejected']} stale write(s) rejected, one query per slot."
            )
            failing = {s["job"]: s["error_reason"] for s in report["per_slot"] if s.get("status") == "failed"}
            if failing:
                demo.out(
                    f"  {totals['slots_failed']} slot(s) FAILED, recorded once (the jobs' own queries, stored and"
                    " served with their reason):"
                )
                for job, reason in sorted(failing.items()):
                    demo.out(f"  - {job}: {reason}")
        else:
            demo.out("FAILED:")
            for failure in demo.failures:
                demo.out(f"  - {failure}")
        demo.print_read_api()
        return 0 if report["ok"] else 1
    except KeyboardInterrupt:
        demo.out("\ninterrupted: stopping the execution environments and the moto server ...")
        return 130
    except LOCAL_RUN_ERRORS as exc:  # moto, the Lambda emulator, files (never a bug's class): one line, no traceback
        return _cannot_run(exc)
    finally:
        demo.close()
        with contextlib.suppress(Exception):
            atexit.unregister(demo.close)
        for signum, handler in previous.items():
            signal.signal(signum, handler)


if __name__ == "__main__":
    sys.exit(main())
