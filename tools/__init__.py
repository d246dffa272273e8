"""Operator tools, run from the repository root with ``python -m tools.<name>`` (never deployed, never in CI).

- ``tools.fence_bump``: raise a job's fencing counter above every token stored with results (after a
  DynamoDB point-in-time restore of the lock table);
- ``tools.smoke_test``: invoke a deployed stack's racers for one slot and check exactly one committed result.

They import the runtime packages (``slotlock``, ``athena_refresh``), installed with the project.
"""
