"""One real slot measured on a DynamoDB endpoint, for the cost per slot (:mod:`bench.cost_slot`).

Per repetition (each under its own job name, same slot :data:`bench.cost.SLOT`):

- **ours**: the real :class:`athena_refresh.job.AthenaRefreshJob` under :class:`slotlock.SlotRunner`, wired as the
  handler wires it (the lock's capacity meter, an :class:`athena_refresh.cost.InvocationCost`, so the commit carries
  the cost attribute), on the DuckDB engine over the sample (:func:`sample_data.flights.ensure_flights_table`).
  Right before the winner starts its query (it holds the slot), a loser on its own client invokes the same slot.
- **unlocked**: the same query, its results prepared by the results store, one plain PutItem of the result item.

Durations exclude the time spent inside the query engine (and the loser's and the sizer's time inside the winner):
what is left is each path's own work (DynamoDB requests, preparing the items, the cost estimate).

DynamoDB units three ways: **reported** by the endpoint (DynamoDB Local's ``ConsumedCapacity``; a failed
conditional write computed from its ALL_OLD item, as the accounting scenario does); by **AWS's published rule**
applied to the items each transaction actually wrote, read back after it by an uncounted client
(:class:`ItemSizer`: 2 WRU per started KB per item, :func:`slotlock.capacity.estimate_write_units`, and the same
again for an item's copy in a global secondary index, the lock table's history index); and **modelled** by ``tools.cost`` (:func:`bench.cost_slot.modelled_units`).
DynamoDB Local 1.25.1 does not follow the per-item rule in transactions (in a probe it reported 4 WRU for a
transaction of one, two or three small items, 8 for one 1.5 KB item), hence the second figure.
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Callable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from athena_refresh.cost import InvocationCost, load_prices
from slotlock.capacity import WRITE_UNIT_BYTES, estimate_write_units, item_size_bytes
from tools.cost.usage import single_write_units, sized_put

from .cost_slot import modelled_units
from .fanout import CountingEngine, run_unlocked
from .stats import median


class ItemSizer:
    """Notes the items each TransactWriteItems of ``client`` writes; :meth:`units` reads them back with ``reader``
    (uncounted) and prices them by AWS's rule, index copies included (see the module docstring)."""

    def __init__(self, client: Any, reader: Any) -> None:
        self.reader = reader
        self.pending: list[tuple[str, Mapping[str, Any]]] = []
        self.seconds = 0.0
        self._tables: dict[str, dict[str, Any]] = {}
        client.meta.events.register("before-parameter-build.dynamodb.TransactWriteItems", self._on_params)

    def _schema(self, table: str) -> dict[str, Any]:
        if table not in self._tables:
            described = self.reader.describe_table(TableName=table)["Table"]
            self._tables[table] = {
                "key": [k["AttributeName"] for k in described["KeySchema"]],
                "indexes": [
                    [k["AttributeName"] for k in index["KeySchema"]]
                    for index in described.get("GlobalSecondaryIndexes", [])
                    if index["Projection"]["ProjectionType"] == "ALL"
                ],
            }
        return self._tables[table]

    def _on_params(self, params: Mapping[str, Any], **_: Any) -> None:
        for entry in params.get("TransactItems", []):
            ((_kind, request),) = entry.items()
            table = request["TableName"]
            key = request.get("Key") or {name: request["Item"][name] for name in self._schema(table)["key"]}
            self.pending.append((table, key))

    def units(self) -> dict[str, int]:
        """WRU of the transactions since the last call: ``table`` (the items) and ``index`` (their copies)."""
        started = time.perf_counter()
        table_units = index_units = 0
        for table, key in self.pending:
            item = self.reader.get_item(TableName=table, Key=key, ConsistentRead=True).get("Item") or {}
            units = estimate_write_units([sized_put(item_size_bytes(item) if item else WRITE_UNIT_BYTES)])
            table_units += units
            for index_key in self._schema(table)["indexes"]:
                if all(name in item for name in index_key):
                    index_units += units
        self.pending.clear()
        self.seconds += time.perf_counter() - started
        return {"table": table_units, "index": index_units}


def measure_slot(
    endpoint: Any, run_id: str, *, repetitions: int = 5, warmup: int = 5, say: Callable[[str], None] = print
) -> dict[str, Any]:
    """Measure ``warmup + repetitions`` slots (see the module docstring); the warm-up ones are discarded."""
    from athena_refresh.engine import client_request_token
    from athena_refresh.job import AthenaRefreshJob
    from athena_refresh.results import ResultsStore, create_results_table
    from local.emulators.duckdb_engine import DuckDBQueryEngine
    from sample_data.flights import ensure_flights_table
    from slotlock import Slot, SlotLock, SlotRunner, create_lock_table
    from slotlock.runner import CHECKPOINT_ACQUIRED, CHECKPOINT_COMMITTED, CHECKPOINT_STATE_RECORDED

    from .backends import make_client
    from .cost import job_definition, job_query
    from .counting import RequestCounter

    job = job_definition()
    query = job_query(job)
    prices = load_prices()
    clients = {role: make_client(endpoint) for role in ("winner", "loser", "runner", "reader")}
    counters = {role: RequestCounter(clients[role], capacity=True) for role in ("winner", "loser", "runner")}
    sizer = ItemSizer(clients["winner"], clients["reader"])
    locks_table, results_table = f"bench-{run_id}-cost-locks", f"bench-{run_id}-cost-results"
    create_lock_table(clients["reader"], locks_table)
    create_results_table(clients["reader"], results_table)
    slot = Slot(int(query.slot.timestamp()))
    lease_s = float(job.config.lease_duration_s)
    no_sleep: Callable[[float], None] = lambda _s: None
    samples: list[dict[str, Any]] = []
    say(f"  cost: one real slot of {query.job} x {warmup + repetitions} (winner, a loser while held, unlocked) ...")
    with tempfile.TemporaryDirectory(prefix="bench-cost-engine-") as state_dir:
        engine = CountingEngine(DuckDBQueryEngine(data_dir=ensure_flights_table().parent, state_dir=Path(state_dir)))
        for number in range(warmup + repetitions):
            name = f"{query.job}-r{number}"
            settings = replace(
                query.settings, job_name=name, lock_table_name=locks_table, results_table_name=results_table
            )
            lock = SlotLock(locks_table, name, client=clients["winner"], lease_duration_s=lease_s)
            losing = SlotRunner(SlotLock(locks_table, name, client=clients["loser"], lease_duration_s=lease_s))
            tracker = InvocationCost(
                prices=prices, racers=job.config.racers, memory_mb=job.config.lambda_memory_mb, capacity=lock.capacity
            )
            marks: dict[str, Any] = {"start": lock.capacity.snapshot()}
            rule: dict[str, dict[str, int]] = {}

            def listener(
                checkpoint: str,
                _lease: Any,
                marks: Any = marks,
                lock: Any = lock,
                rule: Any = rule,
                cost: Any = tracker,
            ) -> None:
                marks[checkpoint] = lock.capacity.snapshot()
                if checkpoint == CHECKPOINT_ACQUIRED:
                    cost.lock_decided()
                elif checkpoint in (CHECKPOINT_STATE_RECORDED, CHECKPOINT_COMMITTED):
                    rule["record_state" if checkpoint == CHECKPOINT_STATE_RECORDED else "commit"] = sizer.units()

            loser: dict[str, Any] = {}

            def race(loser: dict[str, Any] = loser, runner: Any = losing, number: int = number) -> None:
                before, started = counters["loser"].snapshot(), time.perf_counter()
                outcome = runner.run(lambda _run: None, slot=slot, owner_id=f"loser-{number}")
                loser.update(s=time.perf_counter() - started, tally=counters["loser"].snapshot() - before)
                loser["status"] = outcome.status

            engine.seconds, engine.before_start, sizer.seconds = 0.0, race, 0.0
            refresh = AthenaRefreshJob(
                settings=settings,
                engine=engine,
                results=ResultsStore(results_table, dynamodb_client=clients["winner"]),
                sleep_s=no_sleep,
                cost=tracker,
            )
            before, started = counters["winner"].snapshot(), time.perf_counter()
            outcome = SlotRunner(lock, listener=listener).run(refresh, slot=slot, owner_id=f"winner-{number}")
            winner_s = time.perf_counter() - started - engine.seconds - loser["s"] - sizer.seconds
            winner_tally = counters["winner"].snapshot() - before
            if outcome.status != "succeeded" or loser["status"] == "succeeded":
                raise RuntimeError(f"cost slot {name}: winner {outcome.status}, loser {loser['status']}")

            # the unlocked runner: the query, its results, one plain PutItem of the result item
            engine.seconds = 0.0
            store = ResultsStore(results_table, dynamodb_client=clients["runner"])
            before, started = counters["runner"].snapshot(), time.perf_counter()
            token = client_request_token(f"{name}-unlocked", slot.iso, 1, deployment_id=results_table)
            prepared = run_unlocked(engine, store, clients["runner"], settings, slot, token=token, sleep_s=no_sleep)
            item = prepared.writes[0]["Put"]["Item"]
            runner_s = time.perf_counter() - started - engine.seconds
            samples.append(
                {
                    "winner_s": winner_s,
                    "loser_s": loser["s"],
                    "runner_s": runner_s,
                    "winner": winner_tally,
                    "loser": loser["tally"],
                    "runner": counters["runner"].snapshot() - before,
                    "phases": _phases(marks),
                    "rule": rule,
                    "put_item_bytes": item_size_bytes(item),
                    "commit": (prepared.writes, prepared.summary),
                    "scan_bytes": prepared.summary["statistics"]["data_scanned_bytes"],
                }
            )
    return summarise(samples[warmup:], endpoint.backend, endpoint.reports_capacity, job)


def _phases(marks: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """Units and requests per phase, from the lock meter's snapshots at the runner's checkpoints."""
    bounds = [("acquire", "start", "acquired"), ("record_state", "acquired", "state_recorded")]
    bounds += [("heartbeats", "state_recorded", "before_commit"), ("commit", "before_commit", "committed")]
    out = {}
    for phase, low, high in bounds:
        if low in marks and high in marks:
            used = marks[high] - marks[low]
            out[phase] = {
                "read_units": used.read_units,
                "write_units": used.write_units,
                "requests": dict(used.requests),
            }
    return out


def summarise(samples: list[dict[str, Any]], backend: str, reports_capacity: bool, job: Any) -> dict[str, Any]:
    """Medians of the durations; the last sample's requests and units (``stable``: the same in every sample)."""
    last = samples[-1]

    def shape(s: Mapping[str, Any]) -> Any:
        return (s["phases"], s["rule"], s["loser"].calls, s["runner"].calls)

    phases, rule = last["phases"], last["rule"]
    reported = None
    if reports_capacity:
        reported = {
            "winner_write_units": sum(p["write_units"] for p in phases.values()),
            "winner_read_units": sum(p["read_units"] for p in phases.values()),
            "by_phase": {phase: p["write_units"] for phase, p in phases.items()},
            "loser_write_units": last["loser"].capacity_units,
            "put_write_units": last["runner"].capacity_units,
        }
    acquire = phases["acquire"]["write_units"] if reports_capacity else 1.0
    by_phase = {"acquire": acquire, **{phase: float(u["table"] + u["index"]) for phase, u in rule.items()}}
    return {
        "endpoint": backend,
        "repetitions": len(samples),
        "stable": all(shape(s) == shape(last) for s in samples),
        "durations_ms": {
            "winner_lock": median([s["winner_s"] * 1000 for s in samples]),
            "loser": median([s["loser_s"] * 1000 for s in samples]),
            "runner_own": median([s["runner_s"] * 1000 for s in samples]),
        },
        "durations_ms_range": {
            key: [
                round(min(s[f"{key}_s"] for s in samples) * 1000, 2),
                round(max(s[f"{key}_s"] for s in samples) * 1000, 2),
            ]
            for key in ("winner", "loser", "runner")
        },
        "requests": {role: dict(sorted(last[role].calls.items())) for role in ("winner", "loser", "runner")},
        "phases": phases,
        "scan_bytes": last["scan_bytes"],
        "reported_units": reported,
        "aws_rule_units": {
            "winner_write_units": sum(by_phase.values()),
            "by_phase": by_phase,
            "index_write_units": sum(u["index"] for u in rule.values()),
            "loser_write_units": reported["loser_write_units"] if reported else 1.0,
            "put_write_units": float(single_write_units(last["put_item_bytes"])),
        },
        "modelled_units": modelled_units(job, last["commit"]),
    }
