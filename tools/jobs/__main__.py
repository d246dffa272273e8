import sys

from tools.jobs.cli import main

sys.exit(main())
