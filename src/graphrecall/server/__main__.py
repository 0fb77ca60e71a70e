"""``python -m graphrecall.server``: the HTTP server without the full CLI (used by tests and the load test)."""

import sys

from graphrecall.server.serve import main

sys.exit(main())
