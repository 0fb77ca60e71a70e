"""ChatGPT's and Claude.ai's data exports are read like any other history file (graphrecall.chat_exports).

The files are written here in the shape the services export: ChatGPT's ``mapping`` tree with branches, hidden system
messages, tool calls and deleted nodes; Claude.ai's ``chat_messages`` with content items and parent links.
"""

from __future__ import annotations

import json
import zipfile
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from graphrecall.errors import InvalidInput
from graphrecall.formats import detect_format, parse_bytes, read_sessions

T0 = 1_717_000_000.0  # 2024-05-29T16:26:40Z


def _node(
    node_id: str, parent: str | None, children: list[str], message: dict[str, Any] | None
) -> dict[str, Any]:
    return {"id": node_id, "parent": parent, "children": children, "message": message}


def _msg(role: str, text: str | list[Any], at: float | None, **extra: Any) -> dict[str, Any]:
    parts = text if isinstance(text, list) else [text]
    content_type = extra.pop("content_type", "text")
    return {
        "id": f"m-{role}-{at}",
        "author": {"role": role, "name": None, "metadata": {}},
        "create_time": at,
        "update_time": None,
        "content": {"content_type": content_type, "parts": parts},
        "status": "finished_successfully",
        "end_turn": True,
        "weight": 1.0,
        "metadata": extra.pop("metadata", {}),
        "recipient": extra.pop("recipient", "all"),
    }


def chatgpt_conversation() -> dict[str, Any]:
    """root -> hidden system -> user (edited: two branches) -> ...; the second branch is the one the user kept."""
    mapping = {
        "root": _node("root", None, ["sys"], None),
        "sys": _node(
            "sys",
            "root",
            ["u1a", "u1b"],
            _msg("system", "", None, metadata={"is_visually_hidden_from_conversation": True}),
        ),
        "u1a": _node("u1a", "sys", ["a1a"], _msg("user", "I live in Boston.", T0 + 10)),
        "a1a": _node("a1a", "u1a", [], _msg("assistant", "Boston is lovely.", T0 + 11)),
        "u1b": _node(
            "u1b", "sys", ["call"], _msg("user", "I just moved to Lisbon with my cat Miso.", T0 + 20)
        ),
        "call": _node(
            "call", "u1b", ["tool"], _msg("assistant", "search('Lisbon')", T0 + 21, recipient="browser")
        ),
        "tool": _node("tool", "call", ["a1b"], _msg("tool", "Lisbon: capital of Portugal", T0 + 22)),
        "a1b": _node(
            "a1b",
            "tool",
            ["gone", "u2"],
            _msg("assistant", ["Welcome to Lisbon!", {"content_type": "image_asset_pointer"}], T0 + 23),
        ),
        "gone": _node("gone", "a1b", [], None),  # a deleted message
        "u2": _node("u2", "a1b", ["code", "empty"], _msg("user", ["  ", ""], T0 + 30)),  # an empty message
        "code": _node("code", "u2", [], _msg("assistant", "print(1)", T0 + 31, content_type="code")),
        "empty": _node("empty", "u2", ["a3"], _msg("user", "Miso hates the tram.", T0 + 40)),
        "a3": _node("a3", "empty", [], _msg("assistant", "Poor Miso.", T0 + 41)),
    }
    return {
        "title": "Moving",
        "create_time": T0,
        "update_time": T0 + 50,
        "mapping": mapping,
        "current_node": "a3",
        "conversation_id": "c0ffee00-1111-2222-3333-444455556666",
        "id": "c0ffee00-1111-2222-3333-444455556666",
        "default_model_slug": "gpt-4o",
    }


def claude_conversation(*, branched: bool) -> dict[str, Any]:
    def m(
        uuid: str, sender: str, content: list[dict[str, Any]], at: str, parent: str | None
    ) -> dict[str, Any]:
        out: dict[str, Any] = {
            "uuid": uuid,
            "text": "",
            "content": content,
            "sender": sender,
            "created_at": at,
            "updated_at": at,
            "attachments": [{"file_name": "cv.pdf", "extracted_content": "CURRICULUM VITAE ..."}],
            "files": [],
        }
        if branched:
            out["parent_message_uuid"] = parent or "00000000-0000-4000-8000-000000000000"
        return out

    def text(t: str) -> dict[str, Any]:
        return {"type": "text", "text": t, "citations": []}

    msgs = [
        m("h1", "human", [text("My sister Ana is a nurse in Porto.")], "2024-06-01T09:00:00.000000Z", None),
        m(
            "a1",
            "assistant",
            [{"type": "thinking", "thinking": "hmm"}, text("Nice!")],
            "2024-06-01T09:00:05Z",
            "h1",
        ),
        m("h2x", "human", [text("Draft a letter.")], "2024-06-01T09:01:00Z", "a1"),  # an abandoned edit
        m("h2", "human", [text("She got promoted to head nurse.")], "2024-06-01T09:02:00Z", "a1"),
        m(
            "a2",
            "assistant",
            [
                {"type": "tool_use", "name": "web", "input": {}},
                {"type": "tool_result", "content": []},
                text("Congrats"),
            ],
            "2024-06-01T09:02:09Z",
            "h2",
        ),
    ]
    if not branched:
        msgs = [x for x in msgs if x["uuid"] != "h2x"]
    return {
        "uuid": "5e551011-aaaa-bbbb-cccc-000000000001",
        "name": "Family",
        "created_at": "2024-06-01T08:59:59.000000Z",
        "updated_at": "2024-06-01T09:02:09Z",
        "account": {"uuid": "acc"},
        "chat_messages": msgs,
    }


def _write(tmp_path: Path, doc: Any, name: str = "conversations.json") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(doc), encoding="utf-8")
    return path


def test_a_chatgpt_export_is_detected_and_keeps_the_branch_the_user_last_saw(tmp_path: Path) -> None:
    empty_chat = {**chatgpt_conversation(), "id": "empty", "conversation_id": "empty", "current_node": "root"}
    path = _write(tmp_path, [chatgpt_conversation(), empty_chat])
    assert detect_format(path) == "chatgpt"
    [session] = read_sessions(path)  # the conversation with nothing said is not a session
    assert session.session_id == "c0ffee00-1111-2222-3333-444455556666"
    assert session.date == datetime(
        2024, 5, 29, 16, 26, 40
    )  # UTC, stored naive like every date (graphrecall.dates)
    said = [(m.role.value, m.content) for m in session.messages]
    assert said == [
        ("user", "I just moved to Lisbon with my cat Miso."),
        ("assistant", "Welcome to Lisbon!"),
        ("user", "Miso hates the tram."),
        ("assistant", "Poor Miso."),
    ]
    assert session.messages[0].at == datetime(2024, 5, 29, 16, 27, 0)


def test_without_a_current_node_the_latest_branch_is_followed(tmp_path: Path) -> None:
    conv = chatgpt_conversation()
    del conv["current_node"]
    [session] = read_sessions(_write(tmp_path, [conv]))
    assert session.messages[0].content == "I just moved to Lisbon with my cat Miso."  # u1b, the later child
    assert session.messages[-1].content == "Poor Miso."  # 'empty' is u2's last child


def test_a_claude_export_keeps_text_items_and_the_latest_branch(tmp_path: Path) -> None:
    path = _write(tmp_path, [claude_conversation(branched=True)])
    assert detect_format(path) == "claude"
    [session] = read_sessions(path)
    assert session.session_id == "5e551011-aaaa-bbbb-cccc-000000000001"
    assert [(m.role.value, m.content) for m in session.messages] == [
        ("user", "My sister Ana is a nurse in Porto."),
        ("assistant", "Nice!"),
        ("user", "She got promoted to head nurse."),
        ("assistant", "Congrats"),
    ]
    assert session.date == datetime(2024, 6, 1, 8, 59, 59)


def test_a_claude_export_without_parent_links_is_read_in_order(tmp_path: Path) -> None:
    [session] = read_sessions(_write(tmp_path, [claude_conversation(branched=False)]))
    assert [m.content for m in session.messages][-1] == "Congrats"
    assert len(session.messages) == 4


def test_the_export_zip_is_read_through_its_conversations_json(tmp_path: Path) -> None:
    path = tmp_path / "chatgpt-export.zip"
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("chat.html", "<html></html>")
        z.writestr("conversations.json", json.dumps([chatgpt_conversation()]))
    assert detect_format(path) == "chatgpt"
    assert len(read_sessions(path)[0].messages) == 4


def test_a_zip_without_conversations_names_what_it_holds(tmp_path: Path) -> None:
    path = tmp_path / "photos.zip"
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("a.jpg", b"...")
    with pytest.raises(InvalidInput, match=r"without a conversations.json \(it holds a.jpg\)"):
        read_sessions(path)


@pytest.mark.parametrize(
    ("break_it", "where", "says"),
    [
        (lambda c: c.update(mapping=[]), "[0].mapping", "must be an object of message nodes"),
        (
            lambda c: c["mapping"]["u1b"]["message"]["content"].update(parts="hi"),
            "content.parts",
            "must be a list",
        ),
        (
            lambda c: c["mapping"]["u1b"]["message"].update(create_time="yesterday"),
            "create_time",
            "seconds since",
        ),
        (
            lambda c: c["mapping"]["a3"].update(parent="nowhere"),
            "[0].mapping",
            "'nowhere' that is not in the mapping",
        ),
        (lambda c: c["mapping"]["sys"].update(parent="a3"), "[0].mapping", "form a cycle"),
        (lambda c: c.pop("id") and c.pop("conversation_id"), "[0].conversation_id", "is missing"),
    ],
)
def test_a_broken_chatgpt_export_is_refused_naming_the_spot(break_it: Any, where: str, says: str) -> None:
    conv = chatgpt_conversation()
    break_it(conv)
    with pytest.raises(InvalidInput, match=says) as e:
        parse_bytes(json.dumps([conv]).encode(), "conversations.json")
    assert where in str(e.value)


def test_a_file_where_nothing_was_said_is_refused(tmp_path: Path) -> None:
    conv = claude_conversation(branched=False)
    conv["chat_messages"] = []
    with pytest.raises(InvalidInput, match="holds no conversation with a user or assistant message"):
        read_sessions(_write(tmp_path, [conv]))


def test_a_claude_message_content_of_the_wrong_type_is_named() -> None:
    conv = claude_conversation(branched=False)
    conv["chat_messages"][1]["content"] = "Nice!"
    with pytest.raises(InvalidInput, match=r"chat_messages\[1\]\.content.*list of content items"):
        parse_bytes(json.dumps([conv]).encode(), "conversations.json")


def test_the_format_can_be_named_instead_of_detected() -> None:
    data = json.dumps([chatgpt_conversation()]).encode()
    assert len(parse_bytes(data, "x.json", fmt="chatgpt")) == 1
