"""The capacity scenario: many jobs on one Athena capacity budget (issue 24). Its options and seeded plan
(``plan``), the execution environment hosting every job's function (``worker``), the driver (``harness``), the
operator's backfill (``backfill``), the report and its goals (``report``) and the command line (``cli``); the verdict
on Athena's side comes from ``local.scenario.checker.capacity``.

Run it with ``python -m local.capacity`` (or ``make capacity``); docs/local.md describes it.
"""
