"""The demo: the whole job locally on real data, with a kill and a pause (``runner``).

Run it with ``python -m local.demo`` (or ``make demo``); docs/local.md describes it.
"""
