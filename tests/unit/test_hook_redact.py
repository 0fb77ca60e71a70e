"""``hooks.redact``: each documented pattern takes its secret out and says what kind it was; ordinary text that
merely mentions passwords or tokens is left alone."""

from __future__ import annotations

import pytest

from graphrecall.hooks.redact import redact

CASES = [
    (
        "export OPENAI_API_KEY=sk-proj-abcdefghijklmnopqrstuvwxyz123456",
        "export OPENAI_API_KEY=[REDACTED:openai_key]",
    ),
    ("key sk-ant-api03-abcdefghijklmnopqrstuvwxyz", "key [REDACTED:anthropic_key]"),
    ("AWS key AKIAIOSFODNN7EXAMPLE here", "AWS key [REDACTED:aws_key] here"),
    ("AWS_SECRET_ACCESS_KEY=wJalrXUtnFEMI/K7MDENG/bPxRfiCY", "AWS_SECRET_ACCESS_KEY=[REDACTED:assignment]"),
    ("token ghp_" + "a" * 36, "token [REDACTED:github_token]"),
    ("glpat-abcdefghijklmnopqrstu", "[REDACTED:gitlab_token]"),
    ("xoxb-1234567890-abcdefghij", "[REDACTED:slack_token]"),
    ("sk_live_abcdefghijklmnop1234", "[REDACTED:stripe_key]"),
    ("AIza" + "b" * 35, "[REDACTED:google_key]"),
    ("gr_" + "c" * 30, "[REDACTED:graphrecall_key]"),
    ("eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N", "[REDACTED:jwt]"),
    ('curl -H "Authorization: Bearer abc.def-123"', 'curl -H "Authorization: Bearer [REDACTED:bearer]"'),
    (
        "origin https://bob:s3cretpass@github.com/x/y.git",
        "origin https://bob:[REDACTED:url_password]@github.com/x/y.git",
    ),
    ('DB_PASSWORD: "hunter2hunter"', 'DB_PASSWORD: "[REDACTED:assignment]"'),
    ('{"api_key": "abcdef123456"}', '{"api_key": "[REDACTED:assignment]"}'),
    (
        "-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIB\n-----END RSA PRIVATE KEY-----\nafter",
        "[REDACTED:private_key]\nafter",
    ),
]


@pytest.mark.parametrize(("text", "expected"), CASES, ids=[c[1].split("[")[-1][:20] for c in CASES])
def test_each_pattern_redacts_its_secret(text: str, expected: str) -> None:
    assert redact(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        "the tokenizer splits words; reset your password in settings",
        "my_secret_file = path/to/thing",
        'password = "short"',
        "see https://github.com/x/y.git and user@example.com",
        "the access token expires after 3600 s",
    ],
)
def test_ordinary_text_is_left_alone(text: str) -> None:
    assert redact(text) == text


def test_redacting_twice_changes_nothing() -> None:
    once = redact("TOKEN=abcdefghijkl and sk-" + "x" * 30)
    assert redact(once) == once
