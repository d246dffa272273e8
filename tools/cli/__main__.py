"""``python -m tools.cli``: the same as ``athena-once`` (for a checkout without the console script)."""

import sys

from tools.cli import main

sys.exit(main())
