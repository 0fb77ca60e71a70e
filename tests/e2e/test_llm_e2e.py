"""Opt-in: OpenAILLM against the real local llama.cpp server (see /work/shared/llm/README.md).

Run with ``pytest -m e2e tests/e2e/test_llm_e2e.py`` after starting ``serve.sh``; the server URL can be set
with ``GRAPHRECALL_E2E_LLM_BASE_URL``. Proves that the real server's HTTP 500 for ``json_schema`` triggers the
fallback to ``json_object`` + schema and that structured output parses. The first structured request is slow
(grammar warm-up), hence the long timeout.
"""

from __future__ import annotations

import os
import urllib.request

import pytest
from pydantic import BaseModel

pytestmark = pytest.mark.e2e

BASE_URL = os.environ.get("GRAPHRECALL_E2E_LLM_BASE_URL", "http://127.0.0.1:8181/v1")


class City(BaseModel):
    name: str
    country: str


@pytest.fixture(scope="module")
def base_url() -> str:
    try:
        urllib.request.urlopen(f"{BASE_URL}/models", timeout=2).close()
    except OSError:
        pytest.skip(f"no local LLM server at {BASE_URL}")
    return BASE_URL


async def test_structured_output_against_llama_cpp(base_url: str) -> None:
    pytest.importorskip("openai")
    from graphrecall.llm.openai import OpenAILLM

    llm = OpenAILLM("local", base_url=base_url, timeout=300, max_retries=1)

    city, resp = await llm.parse("What is the capital of France?", City, max_tokens=60)

    assert city.country.lower() == "france"
    assert llm.structured_mechanism == "json_object_schema"
    assert resp.usage.input_tokens > 0 and llm.usage.total.cost_usd == 0.0
