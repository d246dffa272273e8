"""``python -m tools.ops``."""

import sys

from tools.ops.cli import main

sys.exit(main())
