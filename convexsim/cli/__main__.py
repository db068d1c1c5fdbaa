"""``python -m convexsim.cli``: the ``convexsim`` command."""

import sys

from convexsim.cli import main

sys.exit(main())
