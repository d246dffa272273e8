"""Conformance, measured: statements with Athena's (Trino's) answers, run on the local engine and through the SQL
check (``athena-once conformance``, :mod:`.cli`; docs/local.md "Conformance").

Modules: :mod:`.cases` (the cases file and its validation), :mod:`.runner` (the local run and the check of each
case), :mod:`.compare` (an answer against the expected value and type), :mod:`.report` (totals and goals),
:mod:`.cli` (the command). The project's corpus is ``corpus/*.json``, drawn from Trino's documentation and tests
(each case names its source file and commit).
"""
