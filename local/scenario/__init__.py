"""The one scenario driver of the local world: ``make demo``, ``make chaos`` and ``make capacity`` are its presets.

A preset's plan is carried out by the driver (:mod:`local.scenario.driver`) on the shared emulators (the local
deployment, the fake Lambda service), in execution environments running the REAL handler
(:mod:`local.emulators.lambda_runtime`, extended by the preset's worker: :mod:`local.chaos.worker`,
:mod:`local.capacity.worker`), judged by the checker, one module per invariant family (:mod:`local.scenario.checker`)
and written as one report (:mod:`local.reports`, the command line's end: :mod:`local.scenario.cli`). Each preset
brings only its plan parameters, its plan, its hooks on the service and its own checks: :mod:`local.demo`,
:mod:`local.chaos`, :mod:`local.capacity`.
"""
