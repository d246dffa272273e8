"""The exit statuses of every command of ``athena-once`` (and of the ``python -m`` aliases): one table.

==========  ====  ==================================================================================================
name        code  meaning
==========  ====  ==================================================================================================
OK          0     done: printed, checked without a problem, every goal or check passed, the operation took effect
FAILED      1     the command ran and said no: a check found a problem, a query failed, a goal or scenario check
                  failed, an operation or a read was refused (``refused:``/``error:`` line), a server could not
                  start, or (``cost``, ``ops``) the machine or the AWS environment lacks something it needs
USAGE       2     bad arguments or an invalid job folder (each problem on its own line), an unknown job; (``results``)
                  no region or credentials; (``local demo|chaos|capacity``) the run could not start for want of
                  something on this machine
UNAVAILABLE 3     (``results``) the service answered 429 or 5xx, or could not be reached: retry later
JOB_FAILING 4     (``ops status``) printed, and a job shown is failing: its last finished slot is FAILED, or MISSED
                  for a reason other than ``paused`` (the reason is in the output)
INTERRUPTED 130   interrupted (Ctrl-C); a backfill resumes when the same command runs again
==========  ====  ==================================================================================================

The per-command meanings above are the ones each command documented before the one command existed; they are kept
so that scripts keep working (docs/cli.md). argparse's own usage errors exit 2 everywhere.
"""

from __future__ import annotations

from enum import IntEnum


class ExitStatus(IntEnum):
    """A command's exit status (the table above)."""

    OK = 0
    FAILED = 1
    USAGE = 2
    UNAVAILABLE = 3
    JOB_FAILING = 4
    INTERRUPTED = 130
