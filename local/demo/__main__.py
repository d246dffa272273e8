"""``python -m local.demo``: the demo (see :mod:`local.demo.runner`, :mod:`local.demo.cli`)."""

import sys

from local.demo.cli import main

sys.exit(main())
