#!/usr/bin/env bash
# One command from a fresh clone: set up the environment, then run the test suite (the e2e tier is opt-in:
# `.venv/bin/pytest -m e2e`, see docs/e2e.md).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh --dev
export HF_HUB_OFFLINE=1
.venv/bin/python -m pytest -q "$@"
