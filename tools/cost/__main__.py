"""``python -m tools.cost``."""

import os
import sys

from tools.cost.cli import main

try:
    status = main()
    sys.stdout.flush()
except BrokenPipeError:  # `... | head`: the reader left; say nothing more
    os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    status = 1
sys.exit(status)
