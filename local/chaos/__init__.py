"""The chaos suite: a seeded fault plan over real racer processes on DynamoDB Local (``harness``), the racer
environment with its fault seams (``worker``), and the history checker (``checker``).

Run it with ``python -m local.chaos`` (or ``make chaos``); docs/reliability.md describes it.
"""
