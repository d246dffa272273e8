"""The one scenario driver of the local world: ``make demo``, ``make chaos`` and ``make capacity`` are its presets.

A scenario is a plan carried out by one driver on the shared emulators, whose workers report what they observe,
judged by one checker and written as one report:

- **the driver** (:mod:`local.scenario.driver`, :class:`~local.scenario.driver.Scenario`): set-up (the work
  directory, the sample data, the local deployments of :mod:`local.emulators.deployment`, the functions on the fake
  Lambda service of :mod:`local.emulators.lambda_service` with their execution environments), the run loop's bounded
  waits, the late deliveries that take a stopped holder's slot over, the verdict's common checks, the teardown;
- **the workers**: :mod:`local.emulators.lambda_runtime` (the REAL handler), extended by a preset's own seams
  (:mod:`local.chaos.worker`'s faults, :mod:`local.capacity.worker`'s observers and engine);
- **the checker**, by invariant family: :mod:`local.scenario.checker` (fencing, final state, terminal records, future
  slots, operator actions, generations) and :mod:`local.scenario.checker.capacity` (the capacity budget);
- **the report**: :mod:`local.reports` (``<name>-report.json``, ``history.jsonl``), and the command line's verdict and
  exit statuses (:mod:`local.scenario.cli`).

Each preset brings only its plan parameters, its plan, its hooks on the service and its own checks: the demo
(:mod:`local.demo`: every job, a kill and a pause, printed tables), the chaos suite (:mod:`local.chaos`: seeded faults
and the negative control without fencing), the capacity scenario (:mod:`local.capacity`: many jobs on one budget and
the negative control without it).
"""
