#!/usr/bin/env bash
# One command from a fresh clone: set up the environment, then ingest examples/ chat history and search it.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export HF_HUB_OFFLINE=1
.venv/bin/python examples/demo.py "$@"
