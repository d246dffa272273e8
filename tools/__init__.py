"""Operator tools, run from the repository root with ``python -m tools.<name>`` (never deployed, never in CI).

- ``tools.fence_bump``: raise a job's fencing counter above every token stored with results (after a
  DynamoDB point-in-time restore of the lock table);
- ``tools.smoke_test``: invoke a deployed stack's racers for one slot and check exactly one committed result.

They import the runtime packages (``slotlock``, ``athena_refresh``) from ``lambdas/``, as the Lambda does.
"""

from __future__ import annotations

import sys
from pathlib import Path

LAMBDAS_DIR = Path(__file__).resolve().parents[1] / "lambdas"
if str(LAMBDAS_DIR) not in sys.path:
    sys.path.insert(0, str(LAMBDAS_DIR))
