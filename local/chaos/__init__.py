"""The chaos suite: a seeded fault plan (``plan``) carried out on the fake Lambda service
(``local.emulators.lambda_service``) by the driver (``harness``), the racer environment with its fault seams
(``worker``), the operator's actions and the generation-aware read-back (``operator``), the history checker
(``checker``, which the demo reuses) and the command line (``cli``).

Run it with ``python -m local.chaos`` (or ``make chaos``); docs/reliability.md describes it.
"""
