"""Scaling to hundreds of jobs (issue 23, "Measure it"): synthesize N copies of a sample job, each N in a fresh
Python process, and read the cloud assembly.

For every N (``full``: 2, 50 and 300 copies of ``tests/fixtures/jobs/flights-dashboard``, folders ``fd-001`` ...):

* the synth's wall seconds: ``python -c`` calling ``app.main(jobs_dir=...)`` with ``CDK_OUTDIR`` set to a temporary
  directory, timed from the spawn to the exit, so the interpreter, the imports and the jsii kernel's start-up are
  counted as a user's ``cdk synth`` pays them; the CPU seconds of the process and the descendants it waited for;
* per stack (every ``*.template.json`` of the assembly): resources, outputs, template bytes; their maximum and total;
  the job stacks holding at least one resource;
* the shared stack's dashboard widgets (its ``DashboardBody``, a ``Fn::Join``, resolved with a placeholder for each
  token and parsed);
* the fixed monthly cost of one job at that job count: :mod:`tools.cost`'s model (the job's own fixed lines plus
  its share of the deployment's), computed from the counts of that N's templates, without another synth.

Then the least-squares line through (N, seconds): seconds per job and the intercept. The goals are judged by
:mod:`bench.report`.
"""

from __future__ import annotations

import json
import os
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Final

REPO_ROOT: Final = Path(__file__).resolve().parent.parent
SAMPLE_JOB: Final = REPO_ROOT / "tests" / "fixtures" / "jobs" / "flights-dashboard"
SHARED_STACK: Final = "ScheduledAthenaRefresh"
#: N per size: copies of the sample job.
COPIES: Final = {"full": (2, 50, 300), "quick": (2, 50, 300), "smoke": (1, 2)}
DASHBOARD_TYPE: Final = "AWS::CloudWatch::Dashboard"
ALARM_TYPE: Final = "AWS::CloudWatch::Alarm"
#: The read side's widget function (the overview widget the dashboard runs on every view): its memory prices a view.
WIDGET_FUNCTION_PREFIX: Final = "ReadApiWidgetFunction"
#: Stands for every token of a ``Fn::Join`` (a ``Ref``, a ``Fn::GetAtt``): valid JSON inside a string and as a value.
TOKEN_PLACEHOLDER: Final = "0"
SYNTH_CODE: Final = "import sys; from pathlib import Path; import app; sys.exit(app.main(jobs_dir=Path(sys.argv[1])))"
_JOBS_IN_DESCRIPTION = re.compile(r"\((\d+) jobs?\b")


def make_jobs(root: Path, copies: int, *, sample: Path = SAMPLE_JOB) -> Path:
    """``root/jobs`` holding ``copies`` copies of ``sample``: ``fd-001``, ``fd-002``, ... (the folder name is the job
    name)."""
    jobs = root / "jobs"
    jobs.mkdir(parents=True)
    width = max(3, len(str(copies)))
    for i in range(1, copies + 1):
        shutil.copytree(sample, jobs / f"fd-{i:0{width}d}")
    return jobs


def synth(jobs_dir: Path, outdir: Path, *, python: str = sys.executable, timeout_s: float = 1800) -> dict[str, Any]:
    """Run ``app.main`` on ``jobs_dir`` in a fresh interpreter writing the assembly to ``outdir``: wall and CPU
    seconds, the exit status, stderr's lines (the quota problems, if any)."""
    env = {**os.environ, "CDK_OUTDIR": str(outdir)}
    env.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.monotonic()
    proc = subprocess.run(
        [python, "-c", SYNTH_CODE, str(jobs_dir)],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout_s,
        check=False,
    )
    wall = time.monotonic() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {
        "wall_s": round(wall, 2),
        "cpu_s": round(cpu, 2),
        "exit_status": proc.returncode,
        "stderr": [line for line in proc.stderr.splitlines() if line.strip()][-20:],
    }


def templates(outdir: Path) -> dict[str, tuple[dict[str, Any], int]]:
    """Every stack template of the assembly in ``outdir``: stack name -> (template, bytes)."""
    found = {}
    for path in sorted(outdir.glob("*.template.json")):
        text = path.read_bytes()
        found[path.name.removesuffix(".template.json")] = (json.loads(text), len(text))
    return found


def join_text(body: Any) -> str:
    """A ``DashboardBody`` as text: a plain string, or a ``Fn::Join`` whose tokens become :data:`TOKEN_PLACEHOLDER`."""
    if isinstance(body, str):
        return body
    if isinstance(body, Mapping) and "Fn::Join" in body:
        separator, parts = body["Fn::Join"]
        return separator.join(part if isinstance(part, str) else TOKEN_PLACEHOLDER for part in parts)
    raise ValueError(f"a DashboardBody neither a string nor a Fn::Join: {str(body)[:80]}")


def widget_count(body: Any) -> int:
    """The widgets of one dashboard: the length of its body's ``widgets`` once parsed; if the body does not parse,
    the ``"type":`` keys at the widgets' level (depth 2: the body object, the widgets array)."""
    text = join_text(body)
    try:
        return len(json.loads(text)["widgets"])
    except (ValueError, KeyError, TypeError):
        return _top_level_types(text)


def _top_level_types(text: str) -> int:
    """The ``"type":`` keys of the objects directly in the body's ``widgets`` array (not a variable's)."""
    depth, count, in_string, escaped, in_widgets = 0, 0, False, False, False
    for i, char in enumerate(text):
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            if depth == 1:
                in_widgets = text.startswith('"widgets"', i)
            elif depth == 3 and in_widgets and text.startswith('"type":', i):
                count += 1
            in_string = True
        elif char in "{[":
            depth += 1
        elif char in "}]":
            depth -= 1
    return count


def stack_figures(name: str, template: Mapping[str, Any], size: int) -> dict[str, Any]:
    resources = template.get("Resources", {})
    match = _JOBS_IN_DESCRIPTION.search(template.get("Description", ""))
    return {
        "stack": name,
        "resources": len(resources),
        "outputs": len(template.get("Outputs", {})),
        "bytes": size,
        "jobs": int(match.group(1)) if match and name != SHARED_STACK else None,
    }


def alarm_tally(resources: Iterable[Mapping[str, Any]]) -> dict[str, int]:
    """Alarms, the metrics they evaluate and the high-resolution ones, as :func:`tools.cost.inputs.count_alarms`
    counts them."""
    from tools.cost.inputs import alarm_metrics

    counted = [alarm_metrics(r.get("Properties", {})) for r in resources if r.get("Type") == ALARM_TYPE]
    return {
        "alarms": len(counted),
        "alarm_metrics": sum(n for n, _ in counted),
        "high_resolution": sum(1 for _, high in counted if high),
    }


def assembly_figures(outdir: Path, copies: int) -> dict[str, Any]:
    """What the assembly in ``outdir`` holds: per stack resources, outputs and bytes; their maximum and total; the
    non-empty job stacks; the dashboards' widgets; the alarm counts and the widget function's memory the cost
    model needs."""
    found = templates(outdir)
    if SHARED_STACK not in found:
        raise ValueError(f"no {SHARED_STACK}.template.json in {outdir}")
    stacks = [stack_figures(name, template, size) for name, (template, size) in found.items()]
    job_stacks = [s for s in stacks if s["stack"] != SHARED_STACK]
    shared_resources = found[SHARED_STACK][0].get("Resources", {})
    dashboards = {
        f"{name}/{logical_id}": widget_count(r["Properties"]["DashboardBody"])
        for name, (template, _) in found.items()
        for logical_id, r in template.get("Resources", {}).items()
        if r.get("Type") == DASHBOARD_TYPE
    }
    job_resources = [
        r for name, (t, _) in found.items() if name != SHARED_STACK for r in t.get("Resources", {}).values()
    ]
    widget_memory = [
        int(r["Properties"]["MemorySize"])
        for logical_id, r in shared_resources.items()
        if logical_id.startswith(WIDGET_FUNCTION_PREFIX) and r.get("Type") == "AWS::Lambda::Function"
    ]
    return {
        "stacks": stacks,
        "job_stacks": len(job_stacks),
        "job_stacks_non_empty": sum(1 for s in job_stacks if s["resources"]),
        "jobs_per_stack_max": max((s["jobs"] or 0 for s in job_stacks), default=0),
        "max": {key: max(s[key] for s in stacks) for key in ("resources", "outputs", "bytes")},
        "total": {key: sum(s[key] for s in stacks) for key in ("resources", "outputs", "bytes")},
        "largest_stack": max(stacks, key=lambda s: s["resources"])["stack"],
        "shared": next(s for s in stacks if s["stack"] == SHARED_STACK),
        "dashboards": dashboards,
        "dashboard_widgets": sum(dashboards.values()),
        "alarms": {
            "deployment": alarm_tally(shared_resources.values()),
            "jobs_total": alarm_tally(job_resources),
        },
        "widget_memory_mb": widget_memory[0] if widget_memory else None,
        "copies": copies,
    }


# --- the fixed monthly cost ------------------------------------------------------------------------------------------
class CostModel:
    """:mod:`tools.cost`'s estimate of the sample job (its query measured once on the sample), priced for any
    number of copies from that N's alarm and dashboard counts."""

    def __init__(self, jobs_dir: Path) -> None:
        from athena_refresh.cost import load_prices
        from tools.cost import cli, inputs, usage

        self.prices = load_prices(cli.default_region(os.environ))
        self.job = inputs.load_definitions(jobs_dir)[0]
        self.run = None
        if inputs.is_measurable(self.job):
            self.run = inputs.measure_sample(
                self.job, data_dir=inputs.sample_data_dir(), slot=inputs.representative_slot(self.job)
            )
        self.durations = usage.Durations(
            usage.DEFAULT_WINNER_DURATION_S, usage.DEFAULT_LOSER_DURATION_MS, usage.DEFAULT_COLD_START_MS
        )
        self.schedule = self.job.config.schedule_expression
        self.capacity = inputs.load_capacity()  # the capacity budget (issue 24), as make cost prices it

    def at(self, figures: Mapping[str, Any]) -> dict[str, Any]:
        """The job's fixed monthly cost with ``figures["copies"]`` copies deployed (:func:`assembly_figures`)."""
        from tools.cost import cli, monthly, usage

        copies = figures["copies"]
        total = figures["alarms"]["jobs_total"]
        if any(value % copies for value in total.values()):
            raise ValueError(f"{copies} identical jobs but job-stack alarm counts {total} not divisible by {copies}")
        per_job = usage.AlarmCount(**{key: value // copies for key, value in total.items()})
        made = cli.job_inputs(
            self.job, per_job, self.prices, scan_flag=None, run=self.run, capacity_permits=self.capacity.permits
        )
        estimate = monthly.estimate_job(made, self.durations, self.prices)
        deployment = monthly.estimate_deployment(
            [estimate] * copies,
            dashboards=len(figures["dashboards"]),
            alarms=usage.AlarmCount(**figures["alarms"]["deployment"]),
            prices=self.prices,
            read_api_memory_mb=figures["widget_memory_mb"] or 256,
            capacity_metrics=len(usage.CAPACITY_METRICS) if self.capacity.enabled else 0,
        )
        return {
            "schedule": self.schedule,
            "job_alarms": per_job.alarms,
            "own_fixed_usd": estimate.fixed_own_usd,
            "deployment_usd": deployment.total_usd,
            "deployment_share_usd": deployment.share_usd,
            "fixed_monthly_usd": monthly.fixed_monthly_usd(estimate, deployment),
            "job_total_usd": estimate.total_usd,
        }


# --- the fit and the run -------------------------------------------------------------------------------------------
def linear_fit(points: Sequence[tuple[float, float]]) -> dict[str, float | None]:
    """Least squares ``y = slope * x + intercept`` over ``points`` (two or more distinct x), with R^2."""
    if len({x for x, _ in points}) < 2:
        return {"slope": None, "intercept": None, "r2": None}
    n = len(points)
    mean_x = sum(x for x, _ in points) / n
    mean_y = sum(y for _, y in points) / n
    sxx = sum((x - mean_x) ** 2 for x, _ in points)
    sxy = sum((x - mean_x) * (y - mean_y) for x, y in points)
    slope = sxy / sxx
    intercept = mean_y - slope * mean_x
    ss_tot = sum((y - mean_y) ** 2 for _, y in points)
    ss_res = sum((y - (slope * x + intercept)) ** 2 for x, y in points)
    return {"slope": slope, "intercept": intercept, "r2": 1 - ss_res / ss_tot if ss_tot else 1.0}


def scaling(
    copies: Sequence[int] = COPIES["full"],
    *,
    sample: Path = SAMPLE_JOB,
    say: Callable[[str], None] = print,
    python: str = sys.executable,
) -> dict[str, Any]:
    """Synthesize ``copies`` copies of ``sample`` (each N in a fresh process), read the assemblies, price one job at
    each N, fit seconds against N."""
    if shutil.which(os.environ.get("JSII_NODE", "node")) is None:
        return {"skipped": "no `node` on PATH: the CDK synth needs Node.js (or set JSII_NODE)"}
    runs: list[dict[str, Any]] = []
    model: CostModel | None = None
    for n in sorted(set(copies)):
        with tempfile.TemporaryDirectory(prefix=f"bench-scaling-{n}-") as tmp:
            jobs_dir = make_jobs(Path(tmp), n, sample=sample)
            say(f"[scaling] {n} jobs: synthesizing in a fresh process ...")
            load_before = os.getloadavg()[0]
            entry: dict[str, Any] = {"jobs": n, "load_average_1m_before": round(load_before, 2)}
            entry.update(synth(jobs_dir, Path(tmp) / "cdk.out", python=python))
            if entry["exit_status"] != 0:
                say(
                    f"[scaling] {n} jobs: synth FAILED (exit {entry['exit_status']}): {' / '.join(entry['stderr'][-3:])}"
                )
                runs.append(entry)
                continue
            entry.update(assembly_figures(Path(tmp) / "cdk.out", n))
            model = model or CostModel(jobs_dir)
            entry["cost"] = model.at(entry)
            say(
                f"[scaling] {n} jobs: {entry['wall_s']:.1f} s wall ({entry['cpu_s']:.1f} s CPU); max per stack"
                f" {entry['max']['resources']} resources, {entry['max']['outputs']} outputs,"
                f" {entry['max']['bytes']:,} B; {entry['dashboard_widgets']} widgets;"
                f" {entry['job_stacks_non_empty']} non-empty job stacks;"
                f" fixed ${entry['cost']['fixed_monthly_usd']:.2f}/job-month"
            )
            runs.append(entry)
    ok = [r for r in runs if r["exit_status"] == 0]
    fit = linear_fit([(r["jobs"], r["wall_s"]) for r in ok])
    cpu_fit = linear_fit([(r["jobs"], r["cpu_s"]) for r in ok])
    return {
        "sample": str(sample.relative_to(REPO_ROOT)) if sample.is_relative_to(REPO_ROOT) else str(sample),
        "copies": sorted(set(copies)),
        "runs": runs,
        "fit": {
            "seconds_per_job": fit["slope"],
            "intercept_s": fit["intercept"],
            "r2": fit["r2"],
            "cpu_seconds_per_job": cpu_fit["slope"],
            "cpu_intercept_s": cpu_fit["intercept"],
            "points": len(ok),
        },
    }
