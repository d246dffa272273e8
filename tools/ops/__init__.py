"""Operate a deployed stack: ``python -m tools.ops`` (:mod:`tools.ops.cli`) over :mod:`tools.ops.operator`."""
