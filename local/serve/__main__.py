"""``python -m local.serve``: the read API over HTTP on the demo's stored results (see :mod:`local.serve.cli`)."""

import sys

from local.serve.cli import main

sys.exit(main())
