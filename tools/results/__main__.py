"""``python -m tools.results``."""

from tools.cli.program import exit_with
from tools.results.cli import main

exit_with(main)
