"""Infrastructure of the scheduled Athena refresh (aws_cdk only; never imports the runtime's boto3 code).

This is the ONE place that puts the Lambda asset root (``lambdas/``) on ``sys.path``, so that stack
modules can ``from athena_refresh import contract`` (constants only, standard library only): the
stack and the runtime then share the names of environment variables and metrics.
Paths are resolved from this file, never from the current working directory.
"""

from __future__ import annotations

import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
LAMBDAS_DIR = REPO_ROOT / "lambdas"  # the Lambda asset root: Code.from_asset(LAMBDAS_DIR)

if str(LAMBDAS_DIR) not in sys.path:
    sys.path.append(str(LAMBDAS_DIR))
