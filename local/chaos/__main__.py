"""``python -m local.chaos``: the full chaos suite (see :mod:`local.chaos.harness`)."""

import sys

from local.chaos.cli import main

sys.exit(main())
