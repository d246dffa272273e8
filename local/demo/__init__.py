"""The demo: the whole job locally on real data, with a kill and a pause: a small fixed plan (``plan``) on the
fake Lambda service the chaos suite also drives, checked by the scenario checker (``runner``, a preset of
:mod:`local.scenario`), printed as tables (``printer``), run from the command line (``cli``).

Run it with ``python -m local.demo`` (or ``make demo``); docs/local.md describes it.
"""
