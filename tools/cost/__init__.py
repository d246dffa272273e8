"""``python -m tools.cost`` (``make cost``): each job's estimated monthly cost by service, before deploying.

:mod:`tools.cost.usage` models one slot's usage and :mod:`tools.cost.monthly` a month of it (no I/O);
:mod:`tools.cost.inputs` reads the repository (job folders, the sample measured on the local engine, the synthesized
template); :mod:`tools.cost.cli` takes the arguments and :mod:`tools.cost.render` prints. docs/cost.md.
"""
