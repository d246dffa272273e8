"""``python -m tools.results``."""

import os
import sys

from tools.results.cli import main

try:
    status = main()
    sys.stdout.flush()
except BrokenPipeError:  # `... --format csv | head`: the reader left; say nothing more
    os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    status = 1
sys.exit(status)
