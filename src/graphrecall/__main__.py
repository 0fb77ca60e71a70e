"""``python -m graphrecall``: the same command line as the ``graphrecall`` script."""

import sys

from graphrecall.cli import main

if __name__ == "__main__":
    sys.exit(main())
