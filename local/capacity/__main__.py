"""``python -m local.capacity``: the capacity scenario (see :mod:`local.capacity.harness`)."""

import sys

from local.capacity.cli import main

sys.exit(main())
