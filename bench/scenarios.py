"""The measured scenarios on one endpoint: request accounting, uncontended cycles, contended races, takeover.

The shared slots and set-up are in :mod:`bench.slots`, the request accounting in :mod:`bench.accounting`.

All timing uses :func:`time.perf_counter` within a process and :func:`time.monotonic` across processes
(CLOCK_MONOTONIC is system-wide on Linux, so racers' timestamps compare). Every loop is bounded, every wait
has a timeout, and every child process is joined, then terminated or killed by its own handle.
"""

from __future__ import annotations

import multiprocessing
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from .accounting import accounting
from .backends import Endpoint
from .contenders import BY_NAME, Contender, SlotKey
from .slots import (
    BARRIER_FIRST_TIMEOUT_S,
    BARRIER_TIMEOUT_S,
    HOLDER_READY_TIMEOUT_S,
    create_tables,
    new_run_id,
    noop,
    run_racers,
    slot_at,
)
from .stats import latency_summary, ratio, spread


# --------------------------------------------------------------------------------------------------
# 2. Uncontended cycles and uncontended losers, interleaved by repetition, paired with the floor
# --------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class CycleSize:
    warmup: int
    repetitions: int
    cycles: int
    loser_calls: int


def uncontended(
    endpoint: Endpoint, run_id: str, contenders: Sequence[type[Contender]], size: CycleSize
) -> dict[str, Any]:
    """Cycle latency (invoke on a fresh slot: acquire, no-op job, commit/release) and loser latency (invoke on
    a slot another invocation holds), per repetition.

    Every repetition starts on fresh tables with fresh, warmed clients (moto's TransactWriteItems deep-copies
    each table it touches, so its cost grows with the items earlier repetitions left; fresh tables keep every
    repetition alike on both endpoints). Repetition 0 is a whole warm-up (JIT of the emulator, lazy imports)
    and is discarded. Contenders take turns within each repetition (the order rotates), so background noise
    spreads over all of them; ratios are to the floor of the same repetition (paired), then summarised.
    """
    names = [cls.name for cls in contenders]
    reps: dict[str, list[dict[str, Any]]] = {name: [] for name in names}
    for rep in range(size.repetitions + 1):
        rep_id = f"{run_id}u{rep}"
        create_tables(endpoint, rep_id, contenders)
        adapters = {cls.name: cls(endpoint, rep_id) for cls in contenders}
        holders = {cls.name: cls(endpoint, rep_id) for cls in contenders}
        for adapter in [*adapters.values(), *holders.values()]:
            adapter.warm()
        next_slot = {name: 0 for name in names}

        # (this repetition's adapters and slot counters are bound as defaults: the closures run in it)
        def cycles(
            name: str, count: int, adapters: dict[str, Any] = adapters, next_slot: dict[str, int] = next_slot
        ) -> list[float]:
            adapter, samples = adapters[name], []
            for _ in range(count):
                key = SlotKey(f"cycle-{name}", slot_at(next_slot[name]))
                next_slot[name] += 1
                started = time.perf_counter()
                outcome = adapter.invoke(key, f"c{next_slot[name]}", noop)
                samples.append(time.perf_counter() - started)
                if not outcome.ran:
                    raise RuntimeError(f"{name}: an uncontended cycle did not run the job ({outcome.detail})")
            return samples

        def losers(
            name: str,
            count: int,
            adapters: dict[str, Any] = adapters,
            holders: dict[str, Any] = holders,
            next_slot: dict[str, int] = next_slot,
        ) -> list[float]:
            samples: list[float] = []
            key = SlotKey(f"held-{name}", slot_at(next_slot[name]))
            next_slot[name] += 1

            def loop() -> None:
                for i in range(count):
                    started = time.perf_counter()
                    outcome = adapters[name].invoke(key, f"l{i}", noop)
                    samples.append(time.perf_counter() - started)
                    if outcome.ran:
                        raise RuntimeError(f"{name}: a loser ran the job while the slot was held")

            held = holders[name].invoke(key, "holder", loop)
            if not held.ran:
                raise RuntimeError(f"{name}: the holder did not get the slot ({held.detail})")
            return samples

        warming = rep == 0
        order = names[rep % len(names) :] + names[: rep % len(names)]
        for name in order:
            cycles(name, size.warmup)  # per repetition: new connections and objects; discarded
            started = time.perf_counter()
            cycle_samples = cycles(name, size.cycles)
            elapsed = time.perf_counter() - started
            loser_samples = losers(name, size.loser_calls)
            if not warming:
                reps[name].append(
                    {
                        "cycle": latency_summary(cycle_samples),
                        "cycles_per_s": size.cycles / elapsed,
                        "loser": latency_summary(loser_samples),
                    }
                )
    results: dict[str, Any] = {}
    floor = reps.get("floor")
    for name in names:
        rows = reps[name]
        entry: dict[str, Any] = {
            "cycle_p50_ms": spread([r["cycle"]["p50_ms"] for r in rows]),
            "cycle_p95_ms": spread([r["cycle"]["p95_ms"] for r in rows]),
            "cycles_per_s": spread([r["cycles_per_s"] for r in rows]),
            "loser_p50_ms": spread([r["loser"]["p50_ms"] for r in rows]),
            "loser_p95_ms": spread([r["loser"]["p95_ms"] for r in rows]),
            "repetitions": rows,
        }
        if floor is not None:
            entry["cycle_p50_vs_floor"] = spread(
                [ratio(r["cycle"]["p50_ms"], f["cycle"]["p50_ms"]) for r, f in zip(rows, floor)]
            )
            entry["cycle_p95_vs_floor_p95"] = spread(
                [ratio(r["cycle"]["p95_ms"], f["cycle"]["p95_ms"]) for r, f in zip(rows, floor)]
            )
            entry["loser_p50_vs_floor"] = spread(
                [ratio(r["loser"]["p50_ms"], f["cycle"]["p50_ms"]) for r, f in zip(rows, floor)]
            )
        results[name] = entry
    return results


# --------------------------------------------------------------------------------------------------
# 3. Contended races: N racer processes released by a barrier, every contender in turn
# --------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Race:
    contender: str
    slot_index: int
    warmup: bool


def racer_main(
    endpoint: Endpoint, run_id: str, races: list[Race], index: int, barrier: Any, records: list[Any]
) -> None:
    """One racer process: one adapter per contender (its own client), warmed, then every race in order.

    Records ``(race number, t_released, t_returned, ran, detail, requests)`` (:func:`bench.slots.run_racers`
    reports them); times are ``time.monotonic()`` seconds (system-wide on Linux).
    """
    adapters = {name: BY_NAME[name](endpoint, run_id) for name in sorted({r.contender for r in races})}
    for adapter in adapters.values():
        adapter.warm()
    for number, race in enumerate(races):
        adapter = adapters[race.contender]
        key = SlotKey(f"race-{race.contender}", slot_at(race.slot_index))
        barrier.wait(BARRIER_FIRST_TIMEOUT_S if number == 0 else BARRIER_TIMEOUT_S)
        before = adapter.counter.tally.requests
        released = time.monotonic()
        outcome = adapter.invoke(key, f"p{index}-r{number}", noop)
        returned = time.monotonic()
        records.append(
            (number, released, returned, outcome.ran, outcome.detail, adapter.counter.tally.requests - before)
        )


def plan_races(contenders: Sequence[str], rounds: int, warmup: int, first_slot: int) -> list[Race]:
    """``warmup + rounds`` races per contender, interleaved (contender order rotates every round)."""
    races: list[Race] = []
    names = list(contenders)
    for round_no in range(warmup + rounds):
        order = names[round_no % len(names) :] + names[: round_no % len(names)]
        races.extend(Race(name, first_slot + round_no, round_no < warmup) for name in order)
    return races


def contended(
    endpoint: Endpoint,
    run_id: str,
    contenders: Sequence[type[Contender]],
    *,
    racers: int,
    rounds: int,
    warmup: int,
    first_slot: int = 0,
    timeout_s: float | None = None,
) -> dict[str, Any]:
    """Race ``racers`` spawned processes ``rounds`` times per contender (plus discarded warm-up rounds).

    Per race: resolution time = last return - first release; job runs (must be 1 where the contender promises
    once per slot); every racer's latency and requests (winner vs losers).
    """
    names = [c.name for c in contenders]
    run_id = f"{run_id}c{racers}"  # fresh, small tables for each racer count (see uncontended)
    create_tables(endpoint, run_id, contenders)
    races = plan_races(names, rounds, warmup, first_slot)
    budget = timeout_s if timeout_s is not None else BARRIER_FIRST_TIMEOUT_S + 10.0 * len(races)
    reports = run_racers(
        racer_main, (endpoint, run_id, races), racers=racers, timeout_s=budget, name="racer", what="racers"
    )
    by_race: dict[int, list[tuple[float, float, bool, str, int]]] = {}
    for _, records, _ in reports:
        for number, released, returned, ran, detail, requests in records:
            by_race.setdefault(number, []).append((released, returned, ran, detail, requests))
    out: dict[str, Any] = {}
    for name in names:
        resolution, runs, winner_requests, loser_requests, loser_latency = [], [], [], [], []
        details: dict[str, int] = {}
        for number, race in enumerate(races):
            if race.contender != name or race.warmup:
                continue
            entries = by_race[number]
            resolution.append(max(e[1] for e in entries) - min(e[0] for e in entries))
            runs.append(sum(1 for e in entries if e[2]))
            for released, returned, ran, detail, requests in entries:
                details[detail] = details.get(detail, 0) + 1
                (winner_requests if ran else loser_requests).append(requests)
                if not ran:
                    loser_latency.append(returned - released)
        out[name] = {
            "races": len(resolution),
            "resolution": latency_summary(resolution),
            "runs_per_slot": {
                "min": min(runs),
                "max": max(runs),
                "mean": sum(runs) / len(runs),
                "slots_not_exactly_once": sum(1 for r in runs if r != 1),
            },
            "winner_requests_mean": _mean(winner_requests),
            "loser_requests": {"mean": _mean(loser_requests), "max": max(loser_requests, default=None)},
            "loser_latency": latency_summary(loser_latency),
            "outcomes": dict(sorted(details.items())),
        }
    floor = out.get("floor")
    for name, entry in out.items():
        if floor is not None:
            entry["resolution_p95_vs_floor_p95"] = ratio(entry["resolution"]["p95_ms"], floor["resolution"]["p95_ms"])
            entry["resolution_p50_vs_floor_p50"] = ratio(entry["resolution"]["p50_ms"], floor["resolution"]["p50_ms"])
    return out


def _mean(values: Sequence[float]) -> float | None:
    return sum(values) / len(values) if values else None


# --------------------------------------------------------------------------------------------------
# 4. Takeover: a holder process is SIGKILLed right after acquiring; a successor polls until it commits
# --------------------------------------------------------------------------------------------------
def holder_main(endpoint: Endpoint, run_id: str, name: str, key: SlotKey, lease_s: float, messages: Any) -> None:
    """Acquire ``key`` and report ``("acquired", monotonic time)``, then hang inside the job until killed."""
    try:
        adapter = BY_NAME[name](endpoint, run_id, lease_s=lease_s)
        adapter.warm()

        def hang() -> None:
            messages.put(("acquired", time.monotonic()))
            time.sleep(HOLDER_READY_TIMEOUT_S)  # bounded: the parent kills us long before

        outcome = adapter.invoke(key, "holder", hang)
        messages.put(("finished", outcome.detail))
    except BaseException:  # noqa: BLE001 - a child process reports any failure to the parent
        messages.put(("error", traceback.format_exc()))


def takeover(
    endpoint: Endpoint,
    run_id: str,
    contenders: Sequence[type[Contender]],
    *,
    lease_s: float,
    repetitions: int,
    poll_s: float = 0.05,
) -> dict[str, Any]:
    """Time from SIGKILL of the holder to the successor's finished run (commit/release), per contender.

    The successor starts polling at once (every ``poll_s``; python-dynamodb-lock waits inside one
    ``acquire_lock`` with ``retry_period=poll_s``). Also reported: time from the holder's acquisition,
    minus the lease (the part that is not the lease itself).
    """
    ctx = multiprocessing.get_context("spawn")
    out: dict[str, Any] = {}
    for cls in contenders:
        if not cls.supports_takeover:
            continue
        successor = cls(endpoint, run_id, lease_s=lease_s)
        successor.warm()
        samples: list[dict[str, Any]] = []
        for rep in range(repetitions):
            key = SlotKey(f"takeover-{cls.name}", slot_at(rep))
            messages = ctx.Queue()
            proc = ctx.Process(target=holder_main, args=(endpoint, run_id, cls.name, key, lease_s, messages))
            proc.start()
            try:
                kind, value = messages.get(timeout=HOLDER_READY_TIMEOUT_S)
                if kind != "acquired":
                    raise RuntimeError(f"{cls.name} holder: {kind}: {value}")
                proc.kill()
                killed = time.monotonic()
                proc.join(10)
                before = successor.counter.tally.requests
                outcome = successor.invoke_until_run(key, "successor", noop, poll_s=poll_s, timeout_s=lease_s * 4 + 10)
                done = time.monotonic()
                if not outcome.ran:
                    raise RuntimeError(f"{cls.name}: the successor never took over ({outcome.detail})")
                samples.append(
                    {
                        "kill_to_commit_s": done - killed,
                        "acquire_to_commit_s": done - value,
                        "beyond_lease_s": done - value - lease_s,
                        "successor_requests": successor.counter.tally.requests - before,
                    }
                )
            finally:
                if proc.is_alive():
                    proc.kill()
                    proc.join(10)
                messages.close()
        out[cls.name] = {
            "lease_s": lease_s,
            "poll_s": poll_s,
            "repetitions": samples,
            "kill_to_commit_s": spread([s["kill_to_commit_s"] for s in samples]),
            "beyond_lease_s": spread([s["beyond_lease_s"] for s in samples]),
            "successor_requests": spread([s["successor_requests"] for s in samples]),
        }
    return out


def run_all(
    endpoint: Endpoint,
    contenders: Sequence[type[Contender]],
    *,
    accounting_slots: int,
    cycle: CycleSize,
    racer_counts: Sequence[int],
    rounds: int,
    warmup_rounds: int,
    takeover_lease_s: float,
    takeover_reps: int,
    say: Callable[[str], None] = print,
) -> dict[str, Any]:
    """Every DynamoDB scenario on one endpoint, fresh tables, in a fixed order."""
    run_id = new_run_id()
    create_tables(endpoint, run_id, contenders)
    result: dict[str, Any] = {"endpoint": endpoint.backend, "run_id": run_id}
    say(f"  [{endpoint.backend}] requests per slot (accounting) ...")
    result["accounting"] = accounting(endpoint, run_id, contenders, slots=accounting_slots)
    say(f"  [{endpoint.backend}] uncontended cycles: {cycle.repetitions} x {cycle.cycles} per contender ...")
    result["uncontended"] = uncontended(endpoint, run_id, contenders, cycle)
    result["contended"] = {}
    first_slot = 0
    for racers in racer_counts:
        say(f"  [{endpoint.backend}] contended: {racers} processes x {rounds} races per contender ...")
        result["contended"][str(racers)] = contended(
            endpoint,
            run_id,
            contenders,
            racers=racers,
            rounds=rounds,
            warmup=warmup_rounds,
            first_slot=first_slot,
        )
        first_slot += rounds + warmup_rounds
    if takeover_reps > 0:
        say(f"  [{endpoint.backend}] takeover after SIGKILL, lease {takeover_lease_s} s x {takeover_reps} ...")
        result["takeover"] = takeover(endpoint, run_id, contenders, lease_s=takeover_lease_s, repetitions=takeover_reps)
    return result
