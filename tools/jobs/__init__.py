"""``python -m tools.jobs``: your jobs, offline: their effective settings, one job's query run now on the local
engine, and every job checked without AWS (see :mod:`tools.jobs.cli`)."""
