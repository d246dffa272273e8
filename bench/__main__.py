"""``python -m bench``: run every benchmark, print the tables, write ``bench-report.json``.

    python -m bench [--size full|quick|smoke] [--backends dynamodb-local,moto-atomic]
                    [--contenders floor,slotlock,...] [--no-coldstart] [--no-fanout]
                    [--no-read-path | --read-path-only] [--no-cost | --cost-only]
                    [--no-scaling | --scaling-only] [--scaling-copies 2,50,300] [--report PATH]

``make bench`` runs the full size (sized for at most about 10 minutes on a 2-core machine) in
``.venv-bench``, which holds the peers. Figures are noisy on a busy machine: the report records the load average at start and end.
``--cost-only`` runs the cost scenarios alone (:mod:`bench.cost`: scan bytes versus history, cost per slot), on the
first selected backend that reports capacity (DynamoDB Local), else the first one.
``--scaling-only`` runs the scaling benchmark alone (:mod:`bench.scaling`: the CDK synth of 2, 50 and 300 copies of a
sample job, each in a fresh process; templates, dashboard widgets, fixed cost per job; about 3 minutes, added
to the full run; ``--no-scaling`` skips it): no backend.
"""

from __future__ import annotations

import argparse
import datetime as dt
import logging
import os
import platform
import sys
import time
from dataclasses import asdict, dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parent.parent

from . import coldstart, cost, cost_measure, fanout, read_path, report, scaling, scenarios
from .backends import BACKEND_NOTES, BACKENDS, Endpoint, running
from .contenders import BY_NAME, select
from .read_path import ReadSize
from .scenarios import CycleSize


@dataclass(frozen=True)
class Size:
    accounting_slots: int
    cycle: CycleSize
    racer_counts: tuple[int, ...]
    rounds: int
    warmup_rounds: int
    takeover_lease_s: float
    takeover_reps: int
    cold_reps: int
    fanout_racers: int
    fanout_slots: int
    read: ReadSize
    cost_histories: tuple[int, ...] = cost.HISTORIES["full"]  # copies of the sample's year (scan bytes)
    cost_slots: int = 5  # real slots measured for the cost per slot (after one warm-up slot)
    scaling_copies: tuple[int, ...] = scaling.COPIES["full"]  # jobs synthesized, each N in a fresh process


#: Per size, in the order of :class:`Size`'s fields (a :class:`CycleSize` is warm-up, repetitions, cycles, loser
#: calls; a :class:`ReadSize` GET latest samples, history samples, warm-up, stub samples).
SIZES = {
    "full": Size(3, CycleSize(10, 5, 60, 30), (2, 8, 32), 12, 2, 1.0, 3, 5, 6, 3, ReadSize(1000, 300, 50, 1000)),
    "quick": Size(2, CycleSize(5, 3, 30, 15), (2, 8, 32), 5, 1, 1.0, 2, 3, 4, 2, ReadSize(500, 150, 30, 500)),
    "smoke": Size(
        *(2, CycleSize(2, 1, 5, 3), (2,), 2, 1, 0.5, 1, 1, 2, 1, ReadSize(200, 50, 20, 300)),
        *(cost.HISTORIES["smoke"], 2, scaling.COPIES["smoke"]),
    ),
}


def machine() -> str:
    model = ""
    try:
        model = next(
            line.split(":", 1)[1].strip()
            for line in Path("/proc/cpuinfo").read_text().splitlines()
            if line.startswith("model name")
        )
    except (OSError, StopIteration):
        pass
    mem_gib = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    return f"{os.cpu_count()} cores {model or platform.machine()}, {mem_gib:.0f} GiB, {platform.system()} {platform.release()}"


def versions() -> dict[str, str]:
    out = {"python": platform.python_version()}
    for dist in ("boto3", "botocore", "moto", "aws-lambda-powertools", "python-dynamodb-lock", "duckdb"):
        try:
            out[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            out[dist] = "not installed"
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__.splitlines()[0])
    parser.add_argument("--size", choices=sorted(SIZES), default="full")
    parser.add_argument("--backends", default=",".join(BACKENDS), help="comma-separated, from: " + ", ".join(BACKENDS))
    parser.add_argument(
        "--contenders", default="", help="comma-separated, from: " + ", ".join(BY_NAME) + " (default all)"
    )
    parser.add_argument("--racers", default="", help="racer process counts, e.g. 2,8,32 (default: the size's)")
    parser.add_argument("--no-coldstart", action="store_true")
    parser.add_argument("--no-fanout", action="store_true")
    reads = parser.add_mutually_exclusive_group()
    reads.add_argument("--no-read-path", action="store_true", help="skip the read API scenario")
    reads.add_argument(
        "--read-path-only",
        action="store_true",
        help="only the read API scenario (GET latest, history page) on each backend: no lock scenarios, "
        "fan-out or cold start",
    )
    costs = parser.add_mutually_exclusive_group()
    costs.add_argument("--no-cost", action="store_true", help="skip the cost scenarios")
    costs.add_argument(
        "--cost-only",
        action="store_true",
        help="only the cost scenarios (scan bytes versus history, one real slot measured and priced against the "
        "alternatives) on one backend: no lock scenarios, read path, fan-out or cold start",
    )
    scales = parser.add_mutually_exclusive_group()
    scales.add_argument(
        "--no-scaling", action="store_true", help="skip the scaling benchmark (the CDK synth of N jobs)"
    )
    scales.add_argument(
        "--scaling-only",
        action="store_true",
        help="only the scaling benchmark: the synth of N copies of a sample job, each in a fresh process, its "
        "templates, dashboard widgets and fixed cost per job; no backend is started",
    )
    parser.add_argument(
        "--scaling-copies", default="", help="job counts to synthesize, e.g. 2,50,300 (default: the size's)"
    )
    parser.add_argument("--report", type=Path, default=REPO_ROOT / "bench-report.json")
    args = parser.parse_args(argv)
    if sum((args.cost_only, args.read_path_only, args.scaling_only)) > 1:
        parser.error("--cost-only, --read-path-only and --scaling-only exclude each other")
    try:
        scaling_copies = tuple(int(n) for n in args.scaling_copies.split(",") if n.strip())
    except ValueError:
        parser.error(f"--scaling-copies {args.scaling_copies!r}: comma-separated job counts expected")
    if any(n < 1 for n in scaling_copies):
        parser.error("--scaling-copies: every job count must be at least 1")

    logging.getLogger("python_dynamodb_lock").setLevel(logging.ERROR)  # it warns on every expired lease
    size = SIZES[args.size]
    backends = [b.strip() for b in args.backends.split(",") if b.strip()]
    unknown = [b for b in backends if b not in BACKENDS] + [
        c for c in args.contenders.split(",") if c and c not in BY_NAME
    ]
    if unknown:
        parser.error(f"unknown backend or contender: {', '.join(unknown)}")
    contenders, skipped = select([c for c in args.contenders.split(",") if c] or None)
    racer_counts = tuple(int(n) for n in args.racers.split(",") if n) or size.racer_counts
    say = lambda text: print(text, flush=True)

    started = time.monotonic()
    result: dict[str, Any] = {
        "meta": {
            "date": dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC"),
            "machine": machine(),
            "size": args.size,
            "parameters": {
                **asdict(size),
                "racer_counts": list(racer_counts),
                "scaling_copies": list(scaling_copies or size.scaling_copies),
            },
            "load_average_start": [round(x, 2) for x in os.getloadavg()],
            "versions": versions(),
        },
        "contenders": [c.name for c in contenders],
        "skipped": skipped,
        "features": {c.name: asdict(c.features) for c in contenders},
        "backends": {},
    }
    for name, reason in skipped.items():
        say(f"skipping {name}: {reason}")
    lock_scenarios = not (args.read_path_only or args.cost_only or args.scaling_only)
    cost_wanted = not (args.no_cost or args.read_path_only or args.scaling_only)
    if args.scaling_only:
        backends = []
    metered = [b for b in backends if Endpoint(b, "").reports_capacity]
    if args.cost_only:
        backends = (metered or backends)[:1]
    slot_measurement: dict[str, Any] | None = None
    for backend in backends:
        say(f"[{backend}] starting ...")
        with running(backend) as endpoint:
            if not lock_scenarios:
                figures = {"endpoint": backend, "run_id": scenarios.new_run_id()}
            else:
                figures = scenarios.run_all(
                    endpoint,
                    contenders,
                    accounting_slots=size.accounting_slots,
                    cycle=size.cycle,
                    racer_counts=racer_counts,
                    rounds=size.rounds,
                    warmup_rounds=size.warmup_rounds,
                    takeover_lease_s=size.takeover_lease_s,
                    takeover_reps=size.takeover_reps,
                    say=say,
                )
            if not (args.no_read_path or args.cost_only):
                figures["read_path"] = read_path.read_path(endpoint, figures["run_id"], size.read, say=say)
            figures.update(note=BACKEND_NOTES[backend], reports_capacity=endpoint.reports_capacity)
            result["backends"][backend] = figures
            if (
                lock_scenarios
                and not args.no_fanout
                and "fanout" not in result
                and any(c.name == "slotlock" for c in contenders)
            ):
                fan = fanout.fanout(
                    endpoint, figures["run_id"], racers=size.fanout_racers, slots=size.fanout_slots, say=say
                )
                result["fanout"] = {**fan, "endpoint": backend}
            if cost_wanted and slot_measurement is None and (endpoint.reports_capacity or not metered):
                slot_measurement = cost_measure.measure_slot(
                    endpoint, figures["run_id"], repetitions=size.cost_slots, say=say
                )
            if lock_scenarios and not args.no_coldstart and backend == "moto-atomic":
                say("[cold start]")
                result["coldstart"] = coldstart.cold_start(endpoint, size.cold_reps, say=say)
    if lock_scenarios and not args.no_coldstart and "coldstart" not in result:
        say("[cold start] (needs the moto server for Athena)")
        with running("moto-atomic") as endpoint:
            result["coldstart"] = coldstart.cold_start(endpoint, size.cold_reps, say=say)
    if cost_wanted:
        measured_on = result["backends"].get(slot_measurement["endpoint"], {}) if slot_measurement else {}
        result["cost"] = cost.cost(
            size.cost_histories,
            slot_measurement,
            accounting=measured_on.get("accounting", {}).get("slotlock"),
            say=say,
        )
    if args.scaling_only or not (args.no_scaling or args.read_path_only or args.cost_only):
        say("[scaling]")
        result["scaling"] = scaling.scaling(scaling_copies or size.scaling_copies, say=say)
    result["targets"] = report.check_targets(
        result["backends"], result.get("fanout"), result.get("coldstart"), result.get("cost"), result.get("scaling")
    )
    result["meta"]["load_average_end"] = [round(x, 2) for x in os.getloadavg()]
    result["meta"]["duration_s"] = round(time.monotonic() - started, 1)
    report.write(args.report, result)
    report.render(result, say)
    say(f"\nwrote {args.report} in {result['meta']['duration_s']} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
