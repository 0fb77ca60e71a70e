"""The web console: the built pages under ``/ui`` and the one route they need beyond the operations,
``GET /v1/orgs`` (the organisations the caller's key may read).

Why it is safe to serve beside the API:

* The pages hold nothing secret and are public like ``/docs``; every read or write they make is an API call that
  carries the key the person typed, in the ``Authorization`` header, and the API checks it as for any client (a key
  sees only its organisations). The key lives in the tab's ``sessionStorage``, never in a URL or a cookie.
* No cookie means no cross-site request forgery: a browser attaches no ``Authorization`` header to a request another
  site makes, and the API sends no CORS headers, so another origin can neither call it with the key nor read it.
* The pages are sent with a Content-Security-Policy that allows only this origin's scripts and forbids framing (no
  clickjacking of the erase button); the scripts write memory text as text nodes, never as markup.

The assets are built from ``console/`` by Vite and committed (``console_assets``), so the wheel carries them and a
``pip install`` needs no node; ``tests/integration/test_console_assets.py`` checks they are the build of the sources.
"""

from __future__ import annotations

from pathlib import Path

from fastapi import APIRouter, FastAPI, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from fastapi.staticfiles import StaticFiles
from pydantic import BaseModel, Field

from graphrecall.memory import Memory
from graphrecall.server.errors import ApiError
from graphrecall.server.middleware import CONSOLE, CONSOLE_ASSETS, LOCAL_PRINCIPAL, principal_of

ASSETS = Path(__file__).with_name("console_assets")
SECURITY_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; "
        "connect-src 'self'; font-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
    ),
    "X-Frame-Options": "DENY",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}


class OrgsResponse(BaseModel):
    """What the caller may read: the organisations of its key (every stored one for a key of ``*``)."""

    orgs: list[str]
    key: str = Field(description="the key's name (never its secret); 'insecure-local' without authentication")
    authenticated: bool = Field(description="false when the server runs without keys (graphrecall ui)")


def mount_console(app: FastAPI, memory: Memory) -> None:
    """Serve the console under ``/ui`` and add ``GET /v1/orgs``. Refuses to start when the assets are missing (a
    source checkout whose build was deleted), since a blank page would look like a broken server."""
    index = ASSETS / "index.html"
    if not index.is_file():
        raise RuntimeError(
            f"the console's built assets are missing ({index}); run `npm run build` in console/"
        )
    page = index.read_text(encoding="utf-8")

    router = APIRouter()

    @router.get(
        "/v1/orgs",
        response_model=OrgsResponse,
        tags=["scope"],
        summary="The organisations the caller's API key may read",
        operation_id="list_orgs",
    )
    async def list_orgs(request: Request) -> OrgsResponse:
        principal = principal_of(request.scope)
        if principal is None:
            raise ApiError(401, "unauthorized", "missing API key: send 'Authorization: Bearer <key>'")
        stored = sorted({s.org_id for s in memory.scopes()})
        orgs = stored if "*" in principal.orgs else sorted(principal.orgs)
        return OrgsResponse(orgs=orgs, key=principal.name, authenticated=principal is not LOCAL_PRINCIPAL)

    app.include_router(router)

    @app.get(CONSOLE, include_in_schema=False)
    async def console_root() -> Response:
        return RedirectResponse(CONSOLE + "/", status_code=308)

    @app.get(CONSOLE + "/", include_in_schema=False)
    async def console_page() -> Response:
        return HTMLResponse(page, headers=SECURITY_HEADERS)

    app.mount(CONSOLE_ASSETS, StaticFiles(directory=ASSETS / "assets"), name="console-assets")
