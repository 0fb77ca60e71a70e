#!/usr/bin/env bash
# Creates ./.venv (if needed) and installs graphrecall with every extra and the dev tools.
# torch is installed first and pinned: an unpinned torch pulls a multi-GB CUDA build, and everything else
# (sentence-transformers, rerankers) must find this CPU wheel already in place.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
.venv/bin/python -m pip install -q --upgrade pip 2>&1 | grep -v "^WARNING: Location" || true
.venv/bin/python -m pip install -q "torch==2.13.0" 2>&1 | grep -v "^WARNING: Location" || true
.venv/bin/python -m pip install -q -e ".[all,dev]" 2>&1 | grep -v "^WARNING: Location" || true
.venv/bin/python -c "import graphrecall, kuzu, torch; print(f'graphrecall {graphrecall.__version__}, kuzu {kuzu.__version__}, torch {torch.__version__}')"
