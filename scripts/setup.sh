#!/usr/bin/env bash
# Creates ./.venv (if needed) and installs graphrecall into it.
#
#   bash scripts/setup.sh          the library alone (what scripts/demo.sh needs: the bundled model, no servers)
#   bash scripts/setup.sh --dev    every extra, the dev tools, Ray and (best effort, as root) nginx: what the test
#                                  suite needs (scripts/test.sh)
#
# torch is installed first and pinned: an unpinned torch pulls a multi-GB CUDA build, and everything else
# (sentence-transformers, rerankers) must find this CPU wheel already in place.
# SETUP_DRY_RUN=1 prints the install commands instead of running them (tests/unit/test_scripts.py).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
dev=""
case "${1:-}" in
  --dev) dev=1 ;;
  "") ;;
  *) echo "usage: bash scripts/setup.sh [--dev]" >&2; exit 2 ;;
esac

run() {
  if [ -n "${SETUP_DRY_RUN:-}" ]; then
    echo "+ $*"
  else
    "$@" 2>&1 | grep -v "^WARNING: Location" || true
  fi
}

if [ -z "${SETUP_DRY_RUN:-}" ] && [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
run .venv/bin/python -m pip install -q --upgrade pip
run .venv/bin/python -m pip install -q "torch==2.13.0"
if [ -z "$dev" ]; then
  run .venv/bin/python -m pip install -q -e .
else
  run .venv/bin/python -m pip install -q -e ".[all,dev]"
  # Ray (the `ray` extra, kept out of `all` for its size; ~20 s here) so tests/integration/test_ray_batch.py runs
  # the two-node loopback cluster instead of skipping.
  run .venv/bin/python -m pip install -q -e ".[ray]"
fi
# The TypeScript client's dependencies (the pinned generator and tsc, from its package-lock.json), for
# tests/integration/test_typescript_client.py: best effort, only where npm exists (the test then skips and says
# why). --prefer-offline reuses npm's cache, so a machine that ran it once needs no registry (~10 s, 38 MB).
if [ -n "$dev" ] && command -v npm >/dev/null 2>&1; then
  if [ -n "${SETUP_DRY_RUN:-}" ]; then
    echo "+ npm ci --prefix clients/typescript --prefer-offline --no-audit --no-fund"
  elif ! timeout 600 npm ci --prefix clients/typescript --prefer-offline --no-audit --no-fund --loglevel=error \
    >/dev/null 2>&1; then
    echo "note: npm ci in clients/typescript failed; tests/integration/test_typescript_client.py will be skipped"
  fi
fi
if [ -n "${SETUP_DRY_RUN:-}" ]; then
  [ -z "$dev" ] || echo "+ apt-get install nginx (best effort: as root, when missing)"
  [ -z "$dev" ] || echo "+ apt-get install chromium (best effort: as root, when missing)"
  exit 0
fi
.venv/bin/python -c "import graphrecall, kuzu, torch; print(f'graphrecall {graphrecall.__version__}, kuzu {kuzu.__version__}, torch {torch.__version__}')"
[ -n "$dev" ] || exit 0

# nginx, for tests/integration/test_shard_proxy.py (docs/scaling.md): best effort and idempotent. Only when nginx is
# missing, apt-get exists and we are root; never fails the setup (the test then skips and says why). policy-rc.d
# (exit 101) keeps the package from starting a system nginx on port 80; the test runs its own on a free port.
if ! command -v nginx >/dev/null 2>&1 && [ ! -x /usr/sbin/nginx ] && command -v apt-get >/dev/null 2>&1 \
  && [ "$(id -u)" = 0 ]; then
  (
    set +e
    policy=""
    if [ ! -e /usr/sbin/policy-rc.d ]; then
      printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d && chmod 755 /usr/sbin/policy-rc.d && policy=1
    fi
    export DEBIAN_FRONTEND=noninteractive
    install="apt-get install -y -qq --no-install-recommends nginx"
    timeout 600 $install >/dev/null 2>&1 || { timeout 300 apt-get update -qq && timeout 600 $install; } >/dev/null 2>&1
    [ -n "$policy" ] && rm -f /usr/sbin/policy-rc.d
    true
  ) || true
  if [ -x /usr/sbin/nginx ] || command -v nginx >/dev/null 2>&1; then
    echo "nginx installed (for the shard proxy test)"
  else
    echo "note: nginx could not be installed; tests/integration/test_shard_proxy.py will be skipped"
  fi
fi

# Chromium, for the web console's browser test (tests/integration/test_console_browser.py drives Debian's chromium
# with Playwright; Playwright's own browser download needs the internet). Best effort, like nginx: ~40 s when the
# package lists are fresh, once per machine; without it the test skips (or fails under GRAPHRECALL_REQUIRE_BROWSER).
if ! command -v chromium >/dev/null 2>&1 && command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
  (
    set +e
    export DEBIAN_FRONTEND=noninteractive
    install="apt-get install -y -qq --no-install-recommends chromium"
    timeout 600 $install >/dev/null 2>&1 || { timeout 300 apt-get update -qq && timeout 600 $install; } >/dev/null 2>&1
    true
  ) || true
  if command -v chromium >/dev/null 2>&1; then
    echo "chromium installed (for the console's browser test)"
  else
    echo "note: chromium could not be installed; tests/integration/test_console_browser.py will be skipped"
  fi
fi
