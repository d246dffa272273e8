"""``python -m tools.ops``."""

from tools.cli.program import exit_with
from tools.ops.cli import main

exit_with(main)
