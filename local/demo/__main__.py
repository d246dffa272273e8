"""``python -m local.demo``: the demo (see :mod:`local.demo.runner`)."""

import sys

from local.demo.runner import main

sys.exit(main())
