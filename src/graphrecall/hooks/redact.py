"""Secrets taken out of a transcript before it is stored: a documented set of patterns.

Why patterns and not a scanner library: the well-known scanners (detect-secrets, gitleaks) are built to flag files
in a repository, not to rewrite text in a process that must finish in milliseconds, and they add a dependency to
every install for a job a short list does. The list below covers the credentials a coding session shows most often
(tool output of ``env``, ``cat .env``, ``git remote -v``, an HTTP request with its headers); each match is replaced
by ``[REDACTED:<kind>]``, so the memory still says that a key was there and of what kind. What the list does not
know is stored as it is: treat a transcript's memory as you treat the transcript itself.

The patterns (``PATTERNS``, in the order they apply):

- ``private_key``: a PEM private key block (``-----BEGIN ... PRIVATE KEY-----`` to its END line);
- ``aws_key``: AWS access key ids (``AKIA``/``ASIA`` + 16);
- ``github_token``: ``ghp_``, ``gho_``, ``ghu_``, ``ghs_``, ``ghr_`` tokens and ``github_pat_`` tokens;
- ``gitlab_token``: ``glpat-`` tokens;
- ``anthropic_key``, ``openai_key``: ``sk-ant-...``, ``sk-...`` / ``sk-proj-...`` keys;
- ``slack_token``: ``xoxb-``, ``xoxp-``, ``xoxa-``, ``xoxr-``, ``xoxs-`` tokens;
- ``stripe_key``: ``sk_live_``, ``sk_test_``, ``rk_live_``, ``rk_test_`` keys;
- ``google_key``: ``AIza`` + 35;
- ``graphrecall_key``: ``gr_`` + 20 or more (this project's API keys);
- ``jwt``: three base64url parts, the first two starting ``eyJ``;
- ``bearer``: the credential after ``Authorization: Bearer`` / ``Basic`` / ``Token``;
- ``url_password``: the password in ``scheme://user:password@host``;
- ``assignment``: the value of ``password``, ``passwd``, ``pwd``, ``secret``, ``token``, ``api_key``/``apikey``,
  ``access_key``, ``private_key``, ``client_secret`` (any case, with a prefix such as ``AWS_SECRET_ACCESS_KEY`` or
  ``DB_PASSWORD``; the name ends there, so ``secret_file = ...`` is left alone) assigned with ``=`` or ``:``, when
  it is 6 characters or more.
"""

from __future__ import annotations

import re
from collections.abc import Callable

_NAMES = r"(?:pass(?:word|wd)?|pwd|secret|token|api[_-]?key|access[_-]?key|private[_-]?key|client[_-]?secret)"

PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = (
    (
        "private_key",
        re.compile(
            r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----.*?(?:-----END [A-Z0-9 ]*PRIVATE KEY-----|\Z)", re.S
        ),
    ),
    ("aws_key", re.compile(r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b")),
    ("github_token", re.compile(r"\b(?:gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{22,})")),
    ("gitlab_token", re.compile(r"\bglpat-[A-Za-z0-9_-]{20,}")),
    ("anthropic_key", re.compile(r"\bsk-ant-[A-Za-z0-9_-]{20,}")),
    ("openai_key", re.compile(r"\bsk-(?:proj-)?[A-Za-z0-9_-]{20,}")),
    ("slack_token", re.compile(r"\bxox[abprs]-[A-Za-z0-9-]{10,}")),
    ("stripe_key", re.compile(r"\b[rs]k_(?:live|test)_[A-Za-z0-9]{16,}")),
    ("google_key", re.compile(r"\bAIza[0-9A-Za-z_-]{35}")),
    ("graphrecall_key", re.compile(r"\bgr_[A-Za-z0-9_-]{20,}")),
    ("jwt", re.compile(r"\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}")),
    ("bearer", re.compile(r"(?i)(?P<pre>\bauthorization\s*[:=]\s*[\"']?(?:bearer|basic|token)\s+)[^\s\"']+")),
    ("url_password", re.compile(r"(?P<pre>\b[a-z][a-z0-9+.-]*://[^\s/:@]+:)[^\s/@]+(?P<post>@)")),
    (
        "assignment",
        re.compile(rf"(?i)(?P<pre>\b[\w.-]*{_NAMES}[\"']?\s*[:=]\s*[\"']?)(?!\[REDACTED)[^\s\"',;]{{6,}}"),
    ),
)


def redact(text: str) -> str:
    """``text`` with every match of ``PATTERNS`` replaced by ``[REDACTED:<kind>]`` (a prefix such as
    ``password=`` or ``Authorization: Bearer`` is kept, so the sentence still reads)."""
    for kind, pattern in PATTERNS:
        text = pattern.sub(_replacement(f"[REDACTED:{kind}]"), text)
    return text


def _replacement(mark: str) -> Callable[[re.Match[str]], str]:
    return lambda m: _keep(m, "pre") + mark + _keep(m, "post")


def _keep(m: re.Match[str], name: str) -> str:
    """The named part of a match that stays (``pre``: what says a secret follows; ``post``: what ends it)."""
    return (m.groupdict().get(name) or "") if name in m.re.groupindex else ""
