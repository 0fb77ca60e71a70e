"""The console's built assets (committed under src/graphrecall/server/console_assets, so that ``pip install`` needs
no node) are the build of the committed sources in console/: ``npm run build`` writes the SHA-256 of the sources
beside them (console/stamp.mjs), and this test recomputes it the same way. A source edit without a rebuild fails
here, naming the command."""

from __future__ import annotations

import hashlib
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
CONSOLE = REPO / "console"
ASSETS = REPO / "src" / "graphrecall" / "server" / "console_assets"
SOURCES = ["index.html", "package.json", "package-lock.json", "vite.config.js", "stamp.mjs", "src"]


def sources_hash() -> str:
    files: list[str] = []
    for name in SOURCES:
        path = CONSOLE / name
        found = [p for p in path.rglob("*") if p.is_file()] if path.is_dir() else [path]
        files += [p.relative_to(CONSOLE).as_posix() for p in found]
    digest = hashlib.sha256()
    for rel in sorted(files):
        digest.update(rel.encode() + b"\0")
        digest.update((CONSOLE / rel).read_bytes())
        digest.update(b"\0")
    return digest.hexdigest()


def test_the_committed_build_is_the_build_of_the_sources() -> None:
    stamp = (ASSETS / "SOURCES.sha256").read_text().strip()
    assert stamp == sources_hash(), "the console's assets are stale: cd console && npm ci && npm run build"


def test_the_page_loads_only_built_files_that_exist() -> None:
    index = (ASSETS / "index.html").read_text()
    referenced = [part.split('"')[0] for part in index.split('="/ui/')[1:]]
    assert referenced and all((ASSETS / ref).is_file() for ref in referenced), referenced
    assert "/src/main.js" not in index  # the built page, not the development one
