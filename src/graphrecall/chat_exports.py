"""Chat-service exports as sessions: ChatGPT's and Claude.ai's ``conversations.json``.

Both services let a user download their history as a zip whose ``conversations.json`` is a list of conversations;
``graphrecall.formats`` detects them (and reads the zip) like its other shapes, and this module turns one
conversation into one ``SessionInput`` named by the conversation's id. What is kept is what the user and the
assistant said to each other, because that is what a memory of the user is made of; the rules, the same for every
file:

ChatGPT (``"mapping"``): a conversation is a tree of message nodes (every edit or regeneration starts a branch).
- The branch kept is the one the user last saw: from ``current_node`` up through each node's ``parent`` to the
  root. Without a usable ``current_node`` (older exports), the last child is followed from the root down, since a
  new branch is appended after the ones it replaces.
- Kept: ``user`` and ``assistant`` messages whose content is ``text`` or ``multimodal_text``, with the string parts
  joined by a blank line (images and files in a part are left out). An assistant message addressed to a tool
  (``recipient`` other than ``all``) is a tool call and is skipped.
- Skipped: ``system`` and ``tool`` messages (custom instructions, search results, code output), other content types
  (``code``, ``execution_output``, ``thoughts``, ``reasoning_recap``, ...), messages the app hides
  (``metadata.is_visually_hidden_from_conversation``), deleted nodes (``message`` is null) and empty messages.
- Dates: each message's ``create_time`` (seconds since the epoch, UTC); the session's is the conversation's
  ``create_time``, else its first kept message's.

Claude.ai (``"chat_messages"``): a list of messages, each with ``sender`` (``human`` or ``assistant``).
- Where messages name their ``parent_message_uuid``, the branch kept is the one ending at the latest message,
  followed up through the parents; otherwise the messages are taken in the order given.
- Kept: the ``text`` items of each message's ``content`` joined by a blank line (its ``text`` field when it has no
  ``content``). Skipped: ``thinking``, ``tool_use``, ``tool_result`` and image items, attachments (a file's
  extracted text is a document, not something said), messages from any other sender and empty messages.
- Dates: ``created_at`` (ISO 8601) of each message; the session's is the conversation's ``created_at``.

A conversation with nothing left after these rules is not a session (an empty chat, every message deleted);
``formats`` refuses a file in which no conversation holds anything. A value of the wrong type anywhere raises
``InvalidInput`` naming the file, the conversation and the field, like every other shape.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from datetime import UTC, datetime
from typing import Any, Literal

from graphrecall.dates import parse_date
from graphrecall.errors import InvalidInput

Service = Literal["chatgpt", "claude"]

_CHATGPT_TEXT = frozenset({"text", "multimodal_text"})
_CLAUDE_ROLES = {"human": "user", "assistant": "assistant"}


def export_service(item: Any) -> Service | None:
    """Which service exported a conversation object, by the keys only that service writes; None: neither."""
    if isinstance(item, Mapping):
        if "mapping" in item and ("current_node" in item or "create_time" in item):
            return "chatgpt"
        if "chat_messages" in item:
            return "claude"
    return None


def conversation_sessions(doc: Any, service: Service, name: str) -> Iterator[dict[str, Any]]:
    """One session dict (``session_id``, ``date``, ``messages``) per conversation that holds anything, in file
    order; the caller validates them as it validates every other shape."""
    conversations = [doc] if isinstance(doc, Mapping) else doc
    if not isinstance(conversations, list):
        raise InvalidInput(f"expected a list of conversations, got {type(doc).__name__}", where=name)
    read = _chatgpt if service == "chatgpt" else _claude
    for i, conv in enumerate(conversations):
        where = f"{name}: [{i}]"
        if not isinstance(conv, Mapping):
            raise InvalidInput(f"expected a conversation object, got {type(conv).__name__}", where=where)
        session = read(conv, where)
        if session["messages"]:
            yield session


# -- ChatGPT ---------------------------------------------------------------------------------------------------------
def _chatgpt(conv: Mapping[str, Any], where: str) -> dict[str, Any]:
    mapping = conv.get("mapping")
    if not isinstance(mapping, Mapping):
        raise InvalidInput(
            f"must be an object of message nodes, got {type(mapping).__name__}", where=f"{where}.mapping"
        )
    messages: list[dict[str, Any]] = []
    for node_id in _chatgpt_branch(mapping, conv.get("current_node"), where):
        node = mapping[node_id]
        if not isinstance(node, Mapping):
            raise InvalidInput(
                f"expected a node object, got {type(node).__name__}", where=f"{where}.mapping[{node_id!r}]"
            )
        kept = _chatgpt_message(node.get("message"), f"{where}.mapping[{node_id!r}].message")
        if kept is not None:
            messages.append(kept)
    date = _epoch(conv.get("create_time"), f"{where}.create_time")
    if date is None and messages:
        date = messages[0].get("at")
    return {
        "session_id": _conversation_id(conv, ("conversation_id", "id"), where),
        "date": date,
        "messages": messages,
    }


def _chatgpt_branch(mapping: Mapping[str, Any], current: Any, where: str) -> list[str]:
    """Node ids of the branch kept, root first (the rule in the module's docstring)."""
    if isinstance(current, str) and current in mapping:
        path: list[str] = []
        seen: set[str] = set()
        node_id: Any = current
        while node_id is not None:
            if not isinstance(node_id, str) or node_id not in mapping:
                raise InvalidInput(
                    f"names a parent {node_id!r} that is not in the mapping", where=f"{where}.mapping"
                )
            if node_id in seen:
                raise InvalidInput(f"the parents of node {current!r} form a cycle", where=f"{where}.mapping")
            seen.add(node_id)
            path.append(node_id)
            node = mapping[node_id]
            node_id = node.get("parent") if isinstance(node, Mapping) else None
        return path[::-1]
    roots = [k for k, n in mapping.items() if not isinstance(n, Mapping) or n.get("parent") is None]
    path = []
    node_id = roots[0] if roots else None
    while isinstance(node_id, str) and node_id in mapping and node_id not in path:
        path.append(node_id)
        node = mapping[node_id]
        children = node.get("children") if isinstance(node, Mapping) else None
        node_id = children[-1] if isinstance(children, list) and children else None
    return path


def _chatgpt_message(message: Any, where: str) -> dict[str, Any] | None:
    if message is None:
        return None  # the root node, or a deleted message
    if not isinstance(message, Mapping):
        raise InvalidInput(f"expected a message object, got {type(message).__name__}", where=where)
    author = message.get("author")
    role = author.get("role") if isinstance(author, Mapping) else None
    if role not in ("user", "assistant"):
        return None
    if role == "assistant" and message.get("recipient", "all") != "all":
        return None  # a call to a tool
    meta = message.get("metadata")
    if isinstance(meta, Mapping) and meta.get("is_visually_hidden_from_conversation"):
        return None
    content = message.get("content")
    kind = content.get("content_type") if isinstance(content, Mapping) else None
    if not isinstance(content, Mapping) or not isinstance(kind, str) or kind not in _CHATGPT_TEXT:
        return None
    parts = content.get("parts")
    if parts is None:
        return None
    if not isinstance(parts, list):
        raise InvalidInput(f"must be a list, got {type(parts).__name__}", where=f"{where}.content.parts")
    text = "\n\n".join(p.strip() for p in parts if isinstance(p, str) and p.strip())
    if not text:
        return None
    out: dict[str, Any] = {"role": role, "content": text}
    at = _epoch(message.get("create_time"), f"{where}.create_time")
    if at is not None:
        out["at"] = at
    return out


def _epoch(value: Any, where: str) -> datetime | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InvalidInput(f"must be seconds since the epoch, got {value!r}", where=where)
    try:
        return datetime.fromtimestamp(value, tz=UTC)
    except (OverflowError, OSError, ValueError):
        raise InvalidInput(f"{value!r} is not a time this program can represent", where=where) from None


# -- Claude.ai -------------------------------------------------------------------------------------------------------
def _claude(conv: Mapping[str, Any], where: str) -> dict[str, Any]:
    items = conv.get("chat_messages")
    if not isinstance(items, list):
        raise InvalidInput(
            f"must be a list of messages, got {type(items).__name__}", where=f"{where}.chat_messages"
        )
    for j, m in enumerate(items):
        if not isinstance(m, Mapping):
            raise InvalidInput(
                f"expected a message object, got {type(m).__name__}", where=f"{where}.chat_messages[{j}]"
            )
    messages = []
    for j in _claude_branch(items, where):
        kept = _claude_message(items[j], f"{where}.chat_messages[{j}]")
        if kept is not None:
            messages.append(kept)
    created = conv.get("created_at")
    date = parse_date(created, where=f"{where}.created_at") if created is not None else None
    if date is None and messages:
        date = messages[0].get("at")
    return {"session_id": _conversation_id(conv, ("uuid", "id"), where), "date": date, "messages": messages}


def _claude_branch(items: list[Mapping[str, Any]], where: str) -> list[int]:
    """Indexes of the messages kept, in order (the rule in the module's docstring)."""
    by_uuid = {m.get("uuid"): j for j, m in enumerate(items) if isinstance(m.get("uuid"), str)}
    if not items or not any("parent_message_uuid" in m for m in items):
        return list(range(len(items)))
    last = max(range(len(items)), key=lambda j: (str(items[j].get("created_at") or ""), j))
    path: list[int] = []
    j: int | None = last
    while j is not None:
        if j in path:
            raise InvalidInput("the messages' parents form a cycle", where=f"{where}.chat_messages")
        path.append(j)
        j = by_uuid.get(items[j].get("parent_message_uuid"))
    return path[::-1]


def _claude_message(m: Mapping[str, Any], where: str) -> dict[str, Any] | None:
    sender = m.get("sender")
    role = _CLAUDE_ROLES.get(sender) if isinstance(sender, str) else None
    if role is None:
        return None
    content = m.get("content")
    if isinstance(content, list):
        texts = [
            c["text"].strip()
            for c in content
            if isinstance(c, Mapping) and c.get("type") == "text" and isinstance(c.get("text"), str)
        ]
        text = "\n\n".join(t for t in texts if t)
    elif content is None:
        raw = m.get("text")
        if raw is not None and not isinstance(raw, str):
            raise InvalidInput(f"must be a string, got {type(raw).__name__}", where=f"{where}.text")
        text = (raw or "").strip()
    else:
        raise InvalidInput(
            f"must be a list of content items, got {type(content).__name__}", where=f"{where}.content"
        )
    if not text:
        return None
    out: dict[str, Any] = {"role": role, "content": text}
    if m.get("created_at") is not None:
        out["at"] = parse_date(m["created_at"], where=f"{where}.created_at")
    return out


def _conversation_id(conv: Mapping[str, Any], keys: tuple[str, ...], where: str) -> Any:
    for key in keys:
        if conv.get(key) is not None:
            return conv[key]
    raise InvalidInput(
        f"is missing (a conversation needs its {' or '.join(keys)})", where=f"{where}.{keys[0]}"
    )
