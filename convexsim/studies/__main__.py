"""``python -m convexsim.studies SPEC ...``: the study command without the main CLI."""

import sys

from convexsim.studies.cli import cli_main

if __name__ == "__main__":
    sys.exit(cli_main(sys.argv[1:]))
