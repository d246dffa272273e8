"""The order pytest-xdist hands test modules to its workers: the longest first (a pytest plugin, registered by
``tests/conftest.py``; used by ``--dist loadfile``, which the Makefile's test targets pass).

xdist's own ``loadfile`` queues modules by their number of tests, most first: the modules with few, long tests
(a 300-job synth, the chaos runs, the multi-process races) came last, and the run ended with one worker busy on
one of them while the other sat idle. Here the modules of :data:`LONGEST_FIRST` go first, in that order (the
longest first: each then runs beside the queue's shorter modules), and every other module after them, by number
of tests as xdist orders them. A module stays on one worker, as with ``loadfile``: its module- and session-scoped
fixtures are set up once per worker.

Modules are named by file name, not path, so a module that moves to another folder keeps its place. The order
comes from measured runs (each module's set-up plus its tests, summed per module); a module missing from the list
only starts later. Without xdist (``-p no:xdist``, ``PYTEST_WORKERS=0``) the plugin does nothing.
"""

from __future__ import annotations

from pathlib import PurePosixPath
from typing import Any

import pytest

#: Test modules by their total duration, longest first (``make test`` on 2 workers, issue 32): the slow scenario
#: runs and races, then the fast subset's DynamoDB-heavy and synthesizing modules. Only the order matters.
LONGEST_FIRST = (
    "test_scale.py",  # slow: the 300-job synth, cfn-lint on its templates
    "test_chaos.py",  # slow: the chaos runs (fenced, unfenced, on the atomic moto server)
    "test_bad_input.py",
    "test_ops.py",  # two Lambda worker processes per test (one moto server process per module)
    "test_stack.py",  # the deployment's synth (the first on its worker) and, slow, the cdk CLI's
    "test_handler.py",
    "test_lock_race.py",  # slow: racing processes
    "test_api.py",
    "test_demo.py",  # slow
    "test_capacity_scenario.py",  # slow
    "test_schema_version.py",
    "test_cost.py",  # tests/scenarios/bench's is slow; athena_refresh's is not short either
    "test_emitted_metrics.py",
    "test_scaling.py",  # slow
    "test_duckdb_engine.py",
    "test_job.py",
    "test_capacity.py",  # tests/stacks': three syntheses
    "test_safe_moves.py",  # two syntheses (16 and 64 job stacks)
    "test_bench_harness.py",  # slow
    "test_tools_smoke_test.py",
    "test_reader.py",
    "test_tools_ops.py",
    "test_serve.py",
    "test_iam_conformance.py",
    "test_read_path.py",  # slow
    "test_atomic_moto.py",  # slow
    "test_chaos_worker.py",
    "test_slotlock_protocol.py",
    "test_iam_conformance_shared.py",
    "test_results.py",
    "test_overview.py",
    "test_dynamodb_local.py",  # slow
    "test_slotlock_faults.py",
    "test_slotlock_manual.py",
    "test_capacity_unreadable.py",
    "test_security.py",
    "test_sample_data_layout.py",
    "test_capacity_gate.py",
    "test_tools_registry.py",
    "test_distributions.py",
)


def longest_first(scopes: list[str]) -> list[str]:
    """``scopes`` (module paths, in xdist's order) with the modules of :data:`LONGEST_FIRST` moved to the front in
    that order; the others keep their order."""
    rank = {name: index for index, name in enumerate(LONGEST_FIRST)}
    return sorted(scopes, key=lambda scope: rank.get(PurePosixPath(scope).name, len(rank)))


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """``--dist loadfile`` with :func:`longest_first`'s order; any other ``--dist`` is xdist's own."""
    if config.getvalue("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    class LongestFirstScheduling(LoadFileScheduling):  # type: ignore[misc]
        def _assign_work_unit(self, node: Any) -> None:
            # xdist fills ``workqueue`` (most tests first) just before the first assignment: reorder it once.
            if not getattr(self, "_reordered", False):
                self._reordered = True
                queue = self.workqueue
                ordered = longest_first(list(queue))
                items = {scope: queue[scope] for scope in ordered}
                queue.clear()
                queue.update(items)
            super()._assign_work_unit(node)

    return LongestFirstScheduling(config, log)
