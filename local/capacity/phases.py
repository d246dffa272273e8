"""The deployments of a capacity run (:mod:`local.capacity.harness`) and their functions' environments.

A :class:`Phase` is one deployment's run: its tables on the shared DynamoDB Local (:class:`LocalDeployment`), its job
catalog with the capacity budget's numbers (:func:`capacity_budget`, the catalog's ``capacity`` section, as the stack
writes it), the environment of its job functions (the wiring), the Athena stand-in's state directory and its plan.
Three kinds:

- ``budget``: the deployment whose lock table holds the capacity budget's permits (``capacity.permits`` N);
- ``second``: another deployment (its own lock table and results table: staging beside production) that shares
  that budget as ``capacity.table_name`` documents it: ``CAPACITY_TABLE_NAME`` names the first deployment's lock
  table, the semaphore's name and N are the same, and its queries run in the same Athena account (the same engine
  state directory, so one quota). Its jobs are named like some of the first's and fire on the same slot: their
  permit owners differ only by the deployment (``#d<lock table>``), and so do their ClientRequestTokens;
- ``control``: the negative control, without the budget (``capacity.permits`` 0), on an engine of its own.

Every deployment of a run has the same ``capacity.max_query_active_s`` and the stand-in's query timeout
(:data:`local.capacity.worker.ENV_ENGINE_QUERY_TIMEOUT_S`) set to the same value: a true upper bound of how long a
query stays active, which the plan's durations respect (:meth:`local.capacity.plan.CapacityOptions.problems`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from athena_refresh import contract
from athena_refresh.budget import CapacityBudget
from local.capacity.backfill import Backfill
from local.capacity.plan import PROBE_JOB, CapacityOptions, CapacityPlan, job_definitions
from local.capacity.worker import (
    ENV_ENGINE_QUERY_TIMEOUT_S,
    ENV_ENGINE_QUOTA,
    ENV_ENGINE_STATE_DIR,
    ENV_QUERY_DURATIONS,
)
from local.emulators.deployment import LocalDeployment
from local.emulators.lambda_service import Delivery
from stacks.jobs import JobDefinition

#: The shared semaphore's name (``<account>-<region>`` in a deployment: every deployment of the account shares it).
SEMAPHORE_NAME = "123456789012-us-east-1"


@dataclass
class FunctionDelivery(Delivery):
    """A delivery to one job's function: ``env`` is where that function's environment differs from the pool's."""

    env: dict[str, str] = field(default_factory=dict)
    owner: str = ""  # the slot's permit owner, <job>#<slot>#g<generation>#d<deployment>

    def invoke_message(self, timeout_ms: int) -> dict[str, Any]:
        return {**super().invoke_message(timeout_ms), "env": self.env}


@dataclass
class Phase:
    """One deployment's run: the budgeted one, a second deployment sharing its budget, or the negative control.
    ``shares``: the phase whose budget (permits) and Athena (engine state) this one uses (``None``: its own)."""

    name: str
    deployment: LocalDeployment
    env: dict[str, str]
    state_dir: Path
    budget: int
    plan: CapacityPlan
    shares: Phase | None = None
    request_ids: set[str] = field(default_factory=set)
    backfill: Backfill | None = None
    probe_request_id: str | None = None
    started_at: float = 0.0
    duration_s: float = 0.0

    @property
    def lock_table(self) -> str:
        """The deployment's lock table: its functions' ``deployment`` in permit owners and ClientRequestTokens."""
        return self.deployment.lock_table


def capacity_budget(budget: int, options: CapacityOptions) -> CapacityBudget:
    """The run's capacity budget as the stack writes it into the job catalog: ``budget`` permits (0: the negative
    control, off), the options' wait in place, headroom and longest active query, the shortest retry delay (60 s,
    Scheduler's granularity; the harness scales it by ``--time-scale``)."""
    return CapacityBudget(
        permits=budget,
        wait_in_place_s=options.wait_in_place_s,
        manual_headroom=options.manual_headroom,
        retry_delay_s=contract.MIN_CAPACITY_RETRY_DELAY_S,
        max_query_active_s=options.max_query_active_s,
    )


def build_phase(
    name: str,
    plan: CapacityPlan,
    budget: int,
    *,
    options: CapacityOptions,
    template: JobDefinition,
    workdir: Path,
    run_id: str,
    endpoint: str | None,
    function_name: str,
    shares: Phase | None = None,
) -> Phase:
    """A deployment (its tables on the shared DynamoDB Local, started here) and its functions' environment."""
    state_dir = (shares.state_dir if shares is not None else workdir / "engine").resolve()
    state_dir.mkdir(parents=True, exist_ok=True)
    deployment = LocalDeployment(
        job_definitions(template, [*plan.jobs, PROBE_JOB]),
        backend="dynamodb-local",
        workdir=workdir,
        lock_table=f"capacity-{name}-locks-{run_id}",
        results_table=f"capacity-{name}-results-{run_id}",
        dynamodb_endpoint=endpoint,
        capacity=capacity_budget(budget, options),
    )
    deployment.start()
    durations = workdir / "durations.json"
    durations.write_text(json.dumps(plan.durations_ms, indent=1), encoding="utf-8")
    env = deployment.function_env(
        function_name=function_name,
        lease_duration_s=options.lease_s,
        heartbeat_interval_s=options.heartbeat_s,
        max_slot_age_s=options.max_slot_age_s,
        log_level="INFO",
    )
    env.update(
        {
            contract.ENV_CAPACITY_SEMAPHORE_NAME: SEMAPHORE_NAME,
            ENV_ENGINE_QUERY_TIMEOUT_S: f"{options.max_query_active_s:g}",
            ENV_ENGINE_STATE_DIR: str(state_dir),
            ENV_ENGINE_QUOTA: json.dumps(
                {
                    "active_queries": options.quota,
                    "start_rate_per_s": options.start_rate_per_s,
                    "start_burst": options.start_burst,
                }
            ),
            ENV_QUERY_DURATIONS: str(durations),
        }
    )
    if shares is not None:  # cdk.json capacity.table_name: the permits live in the first deployment's lock table
        env[contract.ENV_CAPACITY_TABLE_NAME] = shares.lock_table
    return Phase(name, deployment, env, state_dir, budget, plan, shares)


__all__ = ["SEMAPHORE_NAME", "FunctionDelivery", "Phase", "build_phase", "capacity_budget"]
