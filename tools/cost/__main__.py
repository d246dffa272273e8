"""``python -m tools.cost``."""

from tools.cli.program import exit_with
from tools.cost.cli import main

exit_with(main)
