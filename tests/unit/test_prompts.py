"""Prompt files: versioned templates whose placeholders must be filled exactly."""

from __future__ import annotations

from pathlib import Path

import pytest

from graphrecall.prompts import PromptError, list_prompts, load_prompt, parse_prompt

SHIPPED = ("extract_session", "resolve_entity", "version_fact", "consolidate_facts", "summarize_period")


def test_the_shipped_prompts_exist_and_take_values() -> None:
    # Exact placeholders belong to the code that renders each prompt (and evolve with it); here it is enough
    # that every shipped prompt is found and is a template rather than fixed text.
    names = list_prompts()
    for name in SHIPPED:
        assert name in names
        assert load_prompt(name).placeholders
    assert {"session_date", "session_id", "messages"} <= load_prompt("extract_session").placeholders
    # consolidation renders these (extract/consolidate.py); a renamed placeholder must fail here, not at run time
    assert load_prompt("consolidate_facts").placeholders == {"kind", "facts"}
    assert load_prompt("summarize_period").placeholders == {"start", "end", "sessions"}


@pytest.mark.parametrize("name", list_prompts())
def test_every_prompt_renders_with_values_for_exactly_its_placeholders(name: str) -> None:
    prompt = load_prompt(name)
    values = {p: f"<<{p.upper()}>>" for p in prompt.placeholders}

    text = prompt.render(**values)

    assert prompt.version >= 1
    assert not text.startswith("version:")  # the header is not part of the prompt
    for marker in values.values():
        assert marker in text
    assert "{{" not in text and "}}" not in text  # doubled braces became literal ones


@pytest.mark.parametrize("name", list_prompts())
def test_rendering_rejects_missing_and_unexpected_values(name: str) -> None:
    prompt = load_prompt(name)
    values = {p: "x" for p in prompt.placeholders}
    dropped = sorted(prompt.placeholders)[0]

    with pytest.raises(PromptError, match=f"missing \\['{dropped}'\\]"):
        prompt.render(**{k: v for k, v in values.items() if k != dropped})
    with pytest.raises(PromptError, match=r"unexpected \['bogus'\]"):
        prompt.render(**values, bogus="y")


def test_literal_braces_and_header(tmp_path: Path) -> None:
    (tmp_path / "demo.md").write_text('version: 3\n\nSay {greeting} as JSON: {{"text": "..."}}\n')

    prompt = load_prompt("demo", directory=tmp_path)

    assert prompt.version == 3
    assert prompt.placeholders == {"greeting"}
    assert prompt.render(greeting="hi") == 'Say hi as JSON: {"text": "..."}\n'
    assert load_prompt("demo.md", directory=tmp_path).template == prompt.template
    assert list_prompts(tmp_path) == ["demo"]


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("no header\n{x}", "version: N"),
        ("version: one\n{x}", "version: N"),
        ("version: 1\n{0}", "not a plain name"),
        ("version: 1\n{a.b}", "not a plain name"),
        ("version: 1\n{x!r}", "not a plain name"),
        ("version: 1\n{x:>10}", "not a plain name"),
        ("version: 1\nunbalanced {", "literal braces"),
    ],
)
def test_malformed_prompt_files_are_rejected(text: str, problem: str) -> None:
    with pytest.raises(PromptError, match=problem):
        parse_prompt("bad", text)


def test_unknown_prompt_names_the_known_ones(tmp_path: Path) -> None:
    (tmp_path / "one.md").write_text("version: 1\nhi\n")

    with pytest.raises(PromptError, match=r"no prompt named 'two'.*known: one"):
        load_prompt("two", directory=tmp_path)


def test_environment_directory_takes_precedence(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "version_fact.md").write_text("version: 99\noverride {today}\n")
    monkeypatch.setenv("GRAPHRECALL_PROMPTS_DIR", str(tmp_path))

    assert load_prompt("version_fact").version == 99
