"""The web console in a real browser: headless Chromium (Debian's package) driven by Playwright, against a real
server on loopback over a real store whose facts came from a (scripted) extraction.

It signs in with a key, opens a user, reads a superseded fact's history and what was true on a past date, runs a
search and sees every signal and the Reader's context, erases one fact after reading its preview, and checks that a
wrong key, or another organisation's user, shows nothing. One screenshot per page is kept: the folder is printed
(``$CONSOLE_SCREENSHOTS``, else a temporary one).

Skips when Playwright or a Chromium binary is missing, unless ``$GRAPHRECALL_REQUIRE_BROWSER`` is set (CI sets it,
so a broken install fails instead of skipping)."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tests.console_store import ALICE, MIXED, build

from graphrecall import Memory
from graphrecall.embed import HashingEmbedder
from graphrecall.server import create_app
from graphrecall.server.auth import ApiKey, ApiKeyAuth, hash_key
from graphrecall.server.testing import serve_in_thread

ACME_KEY, GLOBEX_KEY = "gr_acme_console_key", "gr_globex_console_key"
BROWSERS = ("chromium", "chromium-browser", "google-chrome")


def _chromium() -> str | None:
    return os.environ.get("CHROMIUM") or next((p for b in BROWSERS if (p := shutil.which(b))), None)


def _require_browser() -> Any:
    required = bool(os.environ.get("GRAPHRECALL_REQUIRE_BROWSER"))
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        if required:
            raise
        pytest.skip("playwright is not installed (pip install playwright)")
    if _chromium() is None:
        if required:
            raise RuntimeError("no chromium binary: apt-get install chromium (or set $CHROMIUM)")
        pytest.skip("no chromium binary (apt-get install chromium)")
    return sync_playwright


@pytest.fixture(scope="module")
def shots(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = Path(os.environ.get("CONSOLE_SCREENSHOTS") or tmp_path_factory.mktemp("console-screenshots"))
    folder.mkdir(parents=True, exist_ok=True)
    print(f"\nconsole screenshots: {folder}")
    return folder


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[str, Memory]]:
    build(tmp_path / "store")
    auth = ApiKeyAuth(
        [
            ApiKey("acme-support", hash_key(ACME_KEY), frozenset({"acme"})),
            ApiKey("globex-support", hash_key(GLOBEX_KEY), frozenset({"globex"})),
        ]
    )
    with (
        Memory.open(tmp_path / "store", embedder=HashingEmbedder(64)) as memory,
        serve_in_thread(create_app(memory, auth=auth, warm=False)) as url,
    ):
        yield url, memory


def test_console_end_to_end(served: tuple[str, Memory], shots: Path) -> None:
    sync_playwright = _require_browser()
    url, memory = served
    cilantro = next(f.id for f in memory.facts(ALICE) if "cilantro" in f.text)
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=_chromium(), args=["--no-sandbox"])
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            errors: list[str] = []
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.set_default_timeout(20_000)

            # A wrong key sees nothing.
            page.goto(f"{url}/ui/")
            page.fill("#key", "gr_wrong")
            page.click("button[type=submit]")
            page.wait_for_selector("text=That key was not accepted.")
            assert page.locator("#scopes").count() == 0
            page.screenshot(path=shots / "login.png")

            # The acme key: one organisation, so its users at once; globex's are not listed.
            page.fill("#key", ACME_KEY)
            page.click("button[type=submit]")
            page.wait_for_selector("#scopes")
            users = page.locator("#scopes tbody tr td:first-child").all_inner_texts()
            assert users == ["alice", "bob"]
            assert "Authorization" not in page.url and ACME_KEY not in page.url
            page.screenshot(path=shots / "scopes.png", full_page=True)

            # Another organisation's user: refused, and none of its text reaches the page.
            page.goto(f"{url}/ui/#/org/globex/user/carol/sessions/c1")
            page.wait_for_selector(".error")
            assert "not allowed" in page.inner_text(".error") or "may not access" in page.inner_text(".error")
            assert "Secret globex" not in page.content()

            # One user: the profile.
            page.goto(f"{url}/ui/#/org/acme")
            page.click("#scopes >> text=alice")
            page.wait_for_selector("text=Identity and attributes")
            assert "The user lives in Berlin" in page.inner_text("#tab")
            page.screenshot(path=shots / "profile.png", full_page=True)

            # Facts: the superseded version and its history, then what was true on a past date.
            page.click("nav.tabs >> text=Facts")
            page.wait_for_selector("#facts")
            page.check("#all")
            page.click("form.bar button[type=submit]")
            page.wait_for_selector("#facts tr.superseded")
            page.locator("#facts tr", has_text="The user lives in Berlin").locator("button.history").click()
            page.wait_for_selector("#history .chain li")
            chain = page.locator("#history .chain li").all_inner_texts()
            assert "The user lives in Munich" in chain[0] and "replaced by" in chain[0]
            assert "The user lives in Berlin" in chain[1] and "current" in chain[1] and "s2" in chain[1]
            page.screenshot(path=shots / "facts-history.png", full_page=True)
            page.uncheck("#all")
            page.fill("#as-of", "2024-02-01")
            page.click("form.bar button[type=submit]")
            page.wait_for_selector("text=Facts true on 2024-02-01")
            then = page.inner_text("#facts")
            assert "Munich" in then and "Berlin" not in then

            # Sessions on a timeline; a fact's source opens its session at the message.
            page.click("nav.tabs >> text=Sessions")
            page.wait_for_selector("svg.timeline circle")
            assert page.locator("svg.timeline circle").count() == 3
            page.goto(f"{url}/ui/#/org/acme/user/alice/sessions/s3/s3%230")
            page.wait_for_selector(".msg.hl")
            assert MIXED in page.inner_text(".msg.hl")
            page.screenshot(path=shots / "sessions.png", full_page=True)

            # The graph: entities, facts and events drawn by cytoscape; a node opens its source.
            page.click("nav.tabs >> text=Graph")
            page.wait_for_selector("#cy[data-ready=true]")
            assert "nodes" in page.inner_text("#tab")
            page.screenshot(path=shots / "graph.png", full_page=True)
            page.evaluate(
                """() => document.getElementById("cy").cy.nodes().filter(
                    (n) => n.data("label") === "The user lives in Berlin").emit("tap")"""
            )
            page.wait_for_selector("#node >> text=Source:")
            page.click("#node a")
            page.wait_for_selector(".msg.hl")
            assert "I moved to Berlin" in page.inner_text(".msg.hl")

            # Search: every signal of every hit, and the context the Reader would get.
            page.click("nav.tabs >> text=Search")
            page.fill("#q", "Where does the user live?")
            page.fill("#qdate", "2024-05-01")
            page.click("#tab form button[type=submit]")
            page.wait_for_selector("#hits tr.hit")
            signals = set(
                page.eval_on_selector_all("#hits td.signal", "cells => cells.map(c => c.dataset.signal)")
            )
            assert {"bm25", "vector", "fused"} <= signals, signals
            assert page.locator("#hits th", has_text="Score").count() == 1
            assert "Berlin" in page.inner_text("#context")
            page.screenshot(path=shots / "search.png", full_page=True)

            page.click("nav.tabs >> text=Jobs")
            page.wait_for_selector("text=0 pending")
            page.screenshot(path=shots / "jobs.png", full_page=True)

            # Erase one fact: its preview first, then the confirmation.
            page.click("nav.tabs >> text=Facts")
            page.wait_for_selector("#facts")
            page.locator("#facts tr", has_text="cilantro").locator("button.danger").click()
            page.wait_for_selector("#facts-to-erase")
            assert page.input_value("#facts-to-erase") == cilantro
            page.click("#tab form button[type=submit]")
            page.wait_for_selector("#erase-items")
            assert "The user dislikes cilantro" in page.inner_text("#erase-items")
            assert [f.id for f in memory.facts(ALICE) if f.id == cilantro]  # a preview deletes nothing
            page.screenshot(path=shots / "erase-preview.png", full_page=True)
            page.click("#confirm-erase")
            page.wait_for_selector("text=Erased 1 records")
            assert not [f for f in memory.facts(ALICE) if f.id == cilantro]
            assert len(memory.sessions(ALICE)) == 3  # what was said stays

            # A words erase shows the whole message it would take.
            page.fill("#facts-to-erase", "")
            page.fill("#matching", "cilantro")
            page.click("#tab form button[type=submit]")
            page.wait_for_selector("#erase-items tr.whole")
            assert MIXED in page.inner_text("#erase-items tr.whole")
            assert "whole" in page.inner_text(".warning")

            # The globex key does not see acme.
            page.click("#logout")
            page.fill("#key", GLOBEX_KEY)
            page.click("button[type=submit]")
            page.wait_for_selector("#scopes")
            assert page.locator("#scopes tbody tr td:first-child").all_inner_texts() == ["carol"]
            page.goto(f"{url}/ui/#/org/acme/user/alice/facts")
            page.wait_for_selector(".error")
            assert "Berlin" not in page.inner_text("main")

            # Readable on a phone.
            phone = browser.new_page(viewport={"width": 390, "height": 844}, is_mobile=True)
            phone.goto(f"{url}/ui/")
            phone.fill("#key", ACME_KEY)
            phone.click("button[type=submit]")
            phone.wait_for_selector("#scopes")
            width = phone.evaluate("document.documentElement.scrollWidth")
            assert width <= 400, width  # the table scrolls inside its box, not the page
            phone.screenshot(path=shots / "phone-scopes.png", full_page=True)
            assert not errors, errors
        except Exception:
            for i, open_page in enumerate(browser.contexts[0].pages if browser.contexts else []):
                open_page.screenshot(path=shots / f"failure-{i}.png", full_page=True)
            raise
        finally:
            browser.close()
