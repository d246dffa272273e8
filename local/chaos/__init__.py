"""The chaos suite: a seeded fault plan (``plan``) carried out on the fake Lambda service
(``local.emulators.lambda_service``) by the driver (``harness``), the racer environment with its fault seams
(``worker``) and their vocabulary (``faults``), the operator's actions and the generation-aware read-back
(``operator``), the checks run and the report (``verdict``) and the command line (``cli``): a preset of the scenario
driver (:mod:`local.scenario`), whose checker (:mod:`local.scenario.checker`) judges the run.

Run it with ``python -m local.chaos`` (or ``make chaos``); docs/reliability.md describes it.
"""
