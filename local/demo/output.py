"""The demo's outputs after its slots: the store for ``make serve``, the tables, the curl lines, the report.

:func:`save_store` snapshots the tables and the bucket into ``<workdir>/store`` (:mod:`local.serve.store`);
:func:`print_demo_tables` and :func:`print_read_api` print through ``Demo.out`` (formatting in
:mod:`local.demo.printer`); :func:`write_demo_report` builds ``demo-report.json`` (its keys: docs/local.md) and
writes it with the harnesses' one report writer (:func:`local.reports.write_report`). The driver
(:class:`local.demo.runner.Demo`) calls each through its methods ``save_store``, ``print_tables``,
``print_read_api`` and ``report``.
"""

from __future__ import annotations

import json
import time
from typing import TYPE_CHECKING, Any

from local.demo.plan import KILL, LOCK_TABLE, REPO_ROOT, RESULTS_BUCKET, RESULTS_TABLE
from local.demo.printer import deployed_job_lines, print_tables, read_api_lines, serve_base_url
from local.emulators.deployment import REGION
from local.reports import write_report
from local.serve.store import STORE_DIR, StoreError, export_store

if TYPE_CHECKING:
    from local.demo.runner import Demo


def save_store(demo: Demo) -> dict[str, Any] | None:
    """Snapshot the tables and the bucket into ``<workdir>/store`` (:func:`local.serve.store.export_store`,
    replacing the previous demo's atomically); returns its manifest, or ``None`` (and a failure) if it could
    not be written."""
    store = demo.workdir / STORE_DIR
    try:
        catalog = json.loads(demo.deployment.catalog_path.read_text(encoding="utf-8"))
        demo.store = export_store(
            demo.deployment.client("dynamodb"),
            demo.deployment.client("s3"),
            store,
            lock_table=LOCK_TABLE,
            results_table=RESULTS_TABLE,
            bucket=RESULTS_BUCKET,
            catalog=catalog,
            region=REGION,
        )
    except (StoreError, OSError, ValueError) as exc:
        demo.failures.append(f"could not write the store for `make serve` to {demo.rel(store)}: {exc}")
        return None
    counts = demo.store["counts"]
    demo.say(
        f"wrote {demo.rel(store)} for `make serve`: {counts['lock_items']} lock items, {counts['result_items']}"
        f" result items, {counts['objects']} S3 objects"
    )
    return demo.store


def print_read_api(demo: Demo) -> None:
    """The curl lines that read this run's results over HTTP (``make serve``, then the deployed API)."""
    if demo.store is None:
        return
    first = demo.jobs[0].job_name
    committed = [rec for rec in demo.slots if rec.job == first and (rec.summary.get("store") or {}).get("result_items")]
    featured = next((rec for rec in committed if rec.fault == KILL), committed[0] if committed else None)
    default_workdir = (REPO_ROOT / ".demo").resolve()
    command = (
        "make serve" if demo.workdir == default_workdir else f"python -m local.serve --workdir {demo.rel(demo.workdir)}"
    )
    demo.out("")
    for line in read_api_lines(
        serve_base_url(),
        job=first,
        slot=featured.iso if featured else None,
        history_job=demo.jobs[-1].job_name,
        serve_command=command,
        store=demo.rel(demo.workdir / STORE_DIR),
    ):
        demo.out(line)
    for line in deployed_job_lines(first):
        demo.out(line)


def print_demo_tables(demo: Demo, totals: dict[str, Any]) -> None:
    print_tables(
        demo.out,
        [rec.summary for rec in demo.slots],
        totals,
        results_table=RESULTS_TABLE,
        jobs={job.job_name: job.config for job in demo.jobs},
    )


def write_demo_report(demo: Demo, totals: dict[str, Any]) -> dict[str, Any]:
    report = {
        **totals,
        "ok": not demo.failures,
        "failures": demo.failures,
        "setup_s": round(demo.setup_s, 2),
        "run_s": round(demo.run_s, 2),
        "total_s": round(time.monotonic() - demo.t0, 2),
        "config": {
            "lease_duration_s": demo.o.lease_s,
            "heartbeat_interval_s": demo.o.heartbeat_s,
            "query_ms": demo.o.query_ms,
            "lambda_timeout_s": demo.o.timeout_s,
            "faults": {f"{rec.job}#{rec.number}": rec.fault for rec in demo.slots if rec.fault},
            "moto_endpoint": demo.deployment.endpoint,
            "workdir": str(demo.workdir),
            "jobs": {
                job.job_name: {
                    "schedule_expression": job.config.schedule_expression,
                    "schedule_timezone": job.config.schedule_timezone,
                    "max_slot_age_s": demo.max_slot_age_s(job),
                    "window_s": job.config.window_s,
                    "data_year": job.config.data_year,
                    "sql": job.query.text,
                    "parameters": list(job.query.parameter_order),
                }
                for job in demo.jobs
            },
            "jobs_not_run": dict(demo.left_out),  # job -> why it cannot run locally (its own table, no files)
        },
        "per_slot": [rec.summary for rec in demo.slots],
        "store": None
        if demo.store is None
        else {
            "path": str(demo.workdir / STORE_DIR),
            "created_at": demo.store["created_at"],
            **demo.store["counts"],
        },
    }
    write_report(demo.o.report, report)
    return report


__all__ = ["print_demo_tables", "print_read_api", "save_store", "write_demo_report"]
