"""Ingest files: detect which of six shapes a file holds and turn it into validated ``SessionInput`` objects.

Shapes (any of them may be gzip-compressed; compression is detected from the magic bytes, not the file name; a zip is read
through its ``conversations.json``):

- ``json``: a JSON list of sessions ``{"session_id", "date", "messages": [{"role", "content"}, ...]}`` (also what
  ``graphrecall export`` writes, so an export can be re-ingested);
- ``jsonl``: the same sessions, one per line; read line by line, so a large history never sits in memory as text;
- ``longmemeval``: a LongMemEval question file (a list of question objects, or one) whose
  ``haystack_sessions``/``haystack_dates``/``haystack_session_ids`` become sessions; haystacks of different
  questions overlap, so a session id seen twice is kept once;
- ``messages``: a plain JSON list of ``{role, content}`` messages, i.e. one session named after the file and dated
  by ``default_date`` or else the file's modification time;
- ``chatgpt`` and ``claude``: the ``conversations.json`` of a ChatGPT or Claude.ai data export (or the export's zip
  itself), one session per conversation (``graphrecall.chat_exports`` says which messages are kept and why).

``read_scope_export`` and ``scope_to_graphml`` read and draw the other export, a whole scope with its extracted
memory (``graphrecall export --format json|graphml``, ``graphrecall import``).

Everything is validated here, before any store is touched, and every problem is an ``InvalidInput`` whose ``where``
names the file, the item and the field (``history.json: sessions[3].messages[2].role``), because the person who has
to fix the file needs to find the spot, and a half-ingested file is worse than none.
"""

from __future__ import annotations

import contextlib
import gzip
import io
import json
import zipfile
import zlib
from collections.abc import Callable, Iterator, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any, Literal, get_args
from xml.etree import ElementTree as ET

from pydantic import ValidationError

from graphrecall.chat_exports import Service, conversation_sessions, export_service
from graphrecall.dates import parse_date
from graphrecall.errors import InvalidInput
from graphrecall.models import (
    SCOPE_EXPORT_FORMAT,
    Role,
    ScopeExport,
    SessionInput,
    validate_identifier,
)
from graphrecall.params import SESSIONS_FORMAT, invalid

Format = Literal["json", "jsonl", "longmemeval", "messages", "chatgpt", "claude"]
FORMATS: tuple[str, ...] = get_args(Format)

_ROLES = frozenset(r.value for r in Role)
_GZIP_MAGIC = b"\x1f\x8b"
_ZIP_MAGIC = b"PK\x03\x04"
_ZIP_MEMBER = "conversations.json"  # what ChatGPT's and Claude.ai's export zips hold the chats in
_PEEK = 64 * 1024

Opener = Callable[[], IO[bytes]]


# -- public entry points ---------------------------------------------------------------------------------------------
def detect_format(path: str | Path) -> Format:
    """Which format ``path`` holds, judged by its content (the name is only used in error messages)."""
    p = Path(path)
    return _Source(_file_opener(p), p.name).detect()


def iter_sessions(
    path: str | Path, *, fmt: Format | str | None = None, default_date: datetime | str | None = None
) -> Iterator[SessionInput]:
    """Validated sessions from ``path``, lazily: JSONL is read line by line; the other formats are one JSON
    document and are parsed whole. A problem raises ``InvalidInput`` when the generator reaches it."""
    p = Path(path)
    mtime = _mtime(p)
    return _Source(_file_opener(p), p.name, stem=_stem(p), mtime=mtime).sessions(fmt, default_date)


def read_sessions(
    path: str | Path, *, fmt: Format | str | None = None, default_date: datetime | str | None = None
) -> list[SessionInput]:
    """All sessions from ``path``, validated. Nothing is returned unless the whole file is valid."""
    return list(iter_sessions(path, fmt=fmt, default_date=default_date))


def parse_bytes(
    data: bytes,
    name: str = "<input>",
    *,
    fmt: Format | str | None = None,
    default_date: datetime | str | None = None,
) -> list[SessionInput]:
    """``read_sessions`` for content already in memory (an upload, a test). ``name`` stands in for the file."""
    src = _Source(lambda: io.BytesIO(data), name, stem=_stem(Path(name)), mtime=None)
    return list(src.sessions(fmt, default_date))


def read_scope_export(path: str | Path) -> ScopeExport:
    """A whole-scope export (``graphrecall export --format json``, gzip too), validated; a problem names the file
    and the field (``alice.json: facts[3].kind``)."""
    p = Path(path)
    src = _Source(_file_opener(p), p.name)
    doc = src._load()
    if isinstance(doc, list) or (isinstance(doc, dict) and doc.get("format") == SESSIONS_FORMAT):
        raise InvalidInput(
            "holds sessions only, not a whole-scope export: add them with graphrecall ingest", where=p.name
        )
    if not isinstance(doc, dict) or doc.get("format") != SCOPE_EXPORT_FORMAT:
        raise InvalidInput(
            f'is not a whole-scope export (expected an object with "format": "{SCOPE_EXPORT_FORMAT}", as '
            "graphrecall export --format json writes)",
            where=p.name,
        )
    try:
        return ScopeExport.model_validate(doc)
    except ValidationError as e:
        err = invalid(e)
        message = str(err).removeprefix(f"{err.where}: ")
        raise InvalidInput(message, where=f"{p.name}: {err.where}" if err.where else p.name) from None


_GRAPHML_NS = "http://graphml.graphdrawing.org/xmlns"
# (attribute, GraphML type) of nodes and of edges; every value is optional per element.
_NODE_KEYS: tuple[tuple[str, str], ...] = (
    ("type", "string"), ("label", "string"), ("text", "string"), ("name", "string"), ("kind", "string"),
    ("polarity", "string"), ("confidence", "double"), ("current", "boolean"), ("valid_from", "string"),
    ("valid_to", "string"), ("recorded_at", "string"), ("expired_at", "string"), ("last_seen", "string"),
    ("session_id", "string"), ("message_ids", "string"), ("entity_type", "string"), ("aliases", "string"),
    ("subject", "string"), ("verb", "string"), ("object", "string"), ("time_start", "string"),
    ("time_end", "string"), ("started_at", "string"), ("extract_status", "string"), ("messages", "int"),
    ("reinforcement", "int"),
)  # fmt: skip
_EDGE_KEYS: tuple[tuple[str, str], ...] = (
    ("type", "string"), ("at", "string"), ("reason", "string"), ("predicate", "string"), ("fact_id", "string"),
)  # fmt: skip


def scope_to_graphml(doc: ScopeExport) -> str:
    """The scope's graph as GraphML (loads in networkx, Gephi, yEd): sessions, entities, facts and events as
    nodes (ids prefixed by their type: ``fact:f_...``), with their attributes (dates as ISO-8601 text, lists as
    JSON text); edges FROM (a fact or event to its session), ABOUT, SUBJECT, OBJECT, SUPERSEDES (new -> old, with
    ``at`` and ``reason``) and RELATED (with ``predicate``). Messages stay inside their session (``messages``
    counts them); facts and events keep their ``message_ids``."""
    root = ET.Element("graphml", xmlns=_GRAPHML_NS)
    for scope_of_key, keys in (("node", _NODE_KEYS), ("edge", _EDGE_KEYS)):
        for name, kind in keys:
            ET.SubElement(
                root, "key", {"id": f"{scope_of_key[0]}_{name}", "for": scope_of_key, "attr.name": name,
                              "attr.type": kind},
            )  # fmt: skip
    graph = ET.SubElement(root, "graph", id=f"{doc.org_id}/{doc.user_id}", edgedefault="directed")
    sessions = {s.id for s in doc.sessions}
    edges: list[tuple[str, str, dict[str, Any]]] = []

    def node(node_id: str, attrs: dict[str, Any]) -> None:
        el = ET.SubElement(graph, "node", id=node_id)
        _graphml_data(el, "n", attrs)

    for s in doc.sessions:
        node(f"session:{s.id}", {"type": "Session", "label": s.id, "started_at": s.started_at,
                                 "extract_status": s.extract_status, "messages": len(s.messages)})  # fmt: skip
    for e in doc.entities:
        node(f"entity:{e.id}", {"type": "Entity", "label": e.name, "name": e.name, "entity_type": e.type,
                                "aliases": e.aliases})  # fmt: skip
    for f in doc.facts:
        node(f"fact:{f.id}", {
            "type": "Fact", "label": f.text, "text": f.text, "kind": f.kind.value, "polarity": f.polarity,
            "confidence": f.confidence, "current": f.current, "valid_from": f.valid_from, "valid_to": f.valid_to,
            "recorded_at": f.recorded_at, "expired_at": f.expired_at, "last_seen": f.last_seen,
            "session_id": f.session_id, "message_ids": f.message_ids, "reinforcement": f.reinforcement,
        })  # fmt: skip
        if f.session_id in sessions:
            edges.append((f"fact:{f.id}", f"session:{f.session_id}", {"type": "FROM"}))
        edges += [(f"fact:{f.id}", f"entity:{x}", {"type": "ABOUT"}) for x in f.entity_ids]
    for v in doc.events:
        node(f"event:{v.id}", {
            "type": "Event", "label": v.text, "text": v.text, "subject": v.subject, "verb": v.verb,
            "object": v.object, "time_start": v.time_start, "time_end": v.time_end, "session_id": v.session_id,
            "message_ids": v.message_ids,
        })  # fmt: skip
        if v.session_id in sessions:
            edges.append((f"event:{v.id}", f"session:{v.session_id}", {"type": "FROM"}))
        edges += [(f"event:{v.id}", f"entity:{x}", {"type": "SUBJECT"}) for x in v.subject_ids]
        edges += [(f"event:{v.id}", f"entity:{x}", {"type": "OBJECT"}) for x in v.object_ids]
    edges += [
        (f"fact:{x.new_id}", f"fact:{x.old_id}", {"type": "SUPERSEDES", "at": x.at, "reason": x.reason})
        for x in doc.supersedes
    ]
    edges += [
        (f"entity:{r.source}", f"entity:{r.target}",
         {"type": "RELATED", "predicate": r.predicate, "fact_id": r.fact_id or None})
        for r in doc.relations
    ]  # fmt: skip
    for i, (a, b, attrs) in enumerate(edges):
        el = ET.SubElement(graph, "edge", id=f"e{i}", source=a, target=b)
        _graphml_data(el, "e", attrs)
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"


def _graphml_data(el: ET.Element, prefix: str, attrs: dict[str, Any]) -> None:
    for name, value in attrs.items():
        if value is None:
            continue
        if isinstance(value, bool):
            text = "true" if value else "false"
        elif isinstance(value, datetime):
            text = value.isoformat()
        elif isinstance(value, list):
            text = json.dumps(value, ensure_ascii=False)
        else:
            text = str(value)
        ET.SubElement(el, "data", key=f"{prefix}_{name}").text = text


# -- implementation --------------------------------------------------------------------------------------------------
def _file_opener(path: Path) -> Opener:
    def opener() -> IO[bytes]:
        try:
            return path.open("rb")
        except FileNotFoundError:
            raise InvalidInput("no such file", where=str(path)) from None
        except IsADirectoryError:
            raise InvalidInput("is a directory, not a file", where=str(path)) from None
        except OSError as e:
            raise InvalidInput(f"cannot be read ({e.strerror})", where=str(path)) from None

    return opener


def _mtime(path: Path) -> datetime | None:
    try:
        return datetime.fromtimestamp(path.stat().st_mtime, UTC).replace(tzinfo=None)
    except OSError:
        return None


def _stem(path: Path) -> str:
    """``chat.json.gz`` -> ``chat``: the session id a plain message list gets."""
    name = path.name
    for suffix in (".gz", ".jsonl", ".json"):
        if name.lower().endswith(suffix) and len(name) > len(suffix):
            name = name[: -len(suffix)]
    return name


def _kind(value: Any) -> str:
    """JSON's name for a Python value's type, for messages a file author understands."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__


def _exported_sessions(doc: dict[str, Any], name: str) -> list[Any]:
    """The sessions of an ``export_sessions`` document (``{"format", "sessions": [{"id", "started_at",
    "messages"}]}``: the HTTP API's and ``graphrecall export``'s shape) in the ``json`` format's shape."""
    sessions = doc.get("sessions")
    if not isinstance(sessions, list):
        raise InvalidInput(f"expected a list of sessions, got {_kind(sessions)}", where=f"{name}: sessions")
    return [
        {"session_id": s.get("id"), "date": s.get("started_at"), "messages": s.get("messages")}
        if isinstance(s, dict)
        else s
        for s in sessions
    ]


class _Source:
    """One input (file or bytes) that can be opened repeatedly: once to peek at it, once to parse it."""

    def __init__(self, opener: Opener, name: str, *, stem: str = "", mtime: datetime | None = None) -> None:
        self._opener = opener
        self.name = name
        self.stem = stem
        self.mtime = mtime

    # -- raw access ------------------------------------------------------------------------------------------------
    @contextlib.contextmanager
    def _open_text(self) -> Iterator[IO[str]]:
        """The content as text, gunzipped when it starts with the gzip magic bytes; closes everything after."""
        with contextlib.ExitStack() as stack, _ReadErrors(self.name):
            raw = stack.enter_context(self._opener())
            head = raw.read(4)
            raw.seek(0)
            binary: Any = raw
            if head[:2] == _GZIP_MAGIC:
                binary = stack.enter_context(gzip.GzipFile(fileobj=raw, mode="rb"))
            elif head == _ZIP_MAGIC:
                binary = stack.enter_context(self._zip_member(stack.enter_context(zipfile.ZipFile(raw))))
            yield stack.enter_context(io.TextIOWrapper(binary, encoding="utf-8-sig"))

    def _zip_member(self, archive: zipfile.ZipFile) -> IO[bytes]:
        """A chat service's export zip: its ``conversations.json`` (at any depth)."""
        names = [n for n in archive.namelist() if n.rsplit("/", 1)[-1] == _ZIP_MEMBER]
        if not names:
            shown = ", ".join(archive.namelist()[:8]) or "nothing"
            raise InvalidInput(
                f"is a zip without a {_ZIP_MEMBER} (it holds {shown}); unzip it and pass the chat file itself",
                where=self.name,
            )
        return archive.open(min(names, key=len))

    def _head(self) -> str:
        with self._open_text() as f:
            return f.read(_PEEK)

    def _load(self) -> Any:
        with self._open_text() as f:
            text = f.read()
        if not text.strip():
            raise InvalidInput("the file is empty", where=self.name)
        return _loads(text, self.name)

    # -- detection -------------------------------------------------------------------------------------------------
    def detect(self) -> Format:
        return self._detect()[0]

    def _detect(self) -> tuple[Format, Any]:
        """The format, and the parsed document when detection had to parse it anyway (``None`` for JSONL)."""
        head = self._head().lstrip()
        if not head:
            raise InvalidInput("the file is empty", where=self.name)
        if head[0] == "[":
            doc = self._load()
            return _detect_list(doc, self.name), doc
        if head[0] != "{":
            raise InvalidInput(
                f"is not a JSON list, object or JSON lines: it starts with {head[:20]!r}", where=self.name
            )
        first_line = head.split("\n", 1)[0]
        try:
            first = json.loads(first_line)
        except (ValueError, RecursionError):
            first = None  # a pretty-printed object spans several lines: parse the whole document
        if isinstance(first, dict) and first.get("format") in (SESSIONS_FORMAT, SCOPE_EXPORT_FORMAT):
            return "json", first  # an export document written on one line is one document, not JSON lines
        if isinstance(first, dict) and (service := export_service(first)) is not None:
            return service, first
        if isinstance(first, dict):
            return ("longmemeval", self._load()) if "haystack_sessions" in first else ("jsonl", None)
        doc = self._load()
        if isinstance(doc, dict) and "haystack_sessions" in doc:
            return "longmemeval", doc
        if (service := export_service(doc)) is not None:
            return service, doc
        # a single session object is a one-session JSON file, however it is laid out
        return "json", doc

    # -- parsing ---------------------------------------------------------------------------------------------------
    def sessions(
        self, fmt: Format | str | None, default_date: datetime | str | None
    ) -> Iterator[SessionInput]:
        if fmt is not None and fmt not in FORMATS:
            raise InvalidInput(f"{fmt!r} is not one of {', '.join(FORMATS)}", where="format")
        fallback = parse_date(default_date, where="--date") if default_date is not None else None
        chosen, doc = (fmt, None) if fmt else self._detect()
        if chosen == "jsonl":
            return self._jsonl(fallback)
        if doc is None:
            doc = self._load()
        if chosen == "json":
            return self._json(doc, fallback)
        if chosen == "longmemeval":
            return self._longmemeval(doc)
        if chosen in ("chatgpt", "claude"):
            return self._conversations(doc, chosen, fallback)  # type: ignore[arg-type]
        return iter([self._messages(doc, fallback)])

    def _conversations(self, doc: Any, service: Service, fallback: datetime | None) -> Iterator[SessionInput]:
        seen: dict[str, str] = {}
        count = 0
        for item in conversation_sessions(doc, service, self.name):
            where = f"{self.name}: conversation {item['session_id']!r}"
            yield _unique(_session(item, where, fallback), where, seen)
            count += 1
        if count == 0:
            raise InvalidInput(
                f"holds no conversation with a user or assistant message to ingest ({service} export)",
                where=self.name,
            )

    def _json(self, doc: Any, fallback: datetime | None) -> Iterator[SessionInput]:
        if isinstance(doc, dict) and doc.get("format") == SCOPE_EXPORT_FORMAT:
            raise InvalidInput(
                "is a whole-scope export (sessions and extracted memory): restore it with graphrecall import",
                where=self.name,
            )
        if isinstance(doc, dict) and doc.get("format") == SESSIONS_FORMAT:  # what export_sessions wrote
            doc = _exported_sessions(doc, self.name)
        elif isinstance(doc, dict):  # one session object on its own
            doc = [doc]
        if not isinstance(doc, list):
            raise InvalidInput(f"expected a JSON list of sessions, got {_kind(doc)}", where=self.name)
        if not doc:
            raise InvalidInput("the list holds no sessions", where=self.name)
        seen: dict[str, str] = {}
        for i, item in enumerate(doc):
            where = f"{self.name}: sessions[{i}]"
            yield _unique(_session(item, where, fallback), where, seen)

    def _jsonl(self, fallback: datetime | None) -> Iterator[SessionInput]:
        seen: dict[str, str] = {}
        count = 0
        with self._open_text() as f:
            for lineno, line in enumerate(f, start=1):
                if not line.strip():
                    continue
                where = f"{self.name}: line {lineno}: session"
                item = _loads(line, where, one_line=True)
                yield _unique(_session(item, where, fallback), where, seen)
                count += 1
        if count == 0:
            raise InvalidInput("the file is empty", where=self.name)

    def _longmemeval(self, doc: Any) -> Iterator[SessionInput]:
        questions = [doc] if isinstance(doc, dict) else doc
        if not isinstance(questions, list):
            raise InvalidInput(f"expected LongMemEval question objects, got {_kind(doc)}", where=self.name)
        if not questions:
            raise InvalidInput("the list holds no questions", where=self.name)
        seen: set[str] = set()
        for qi, q in enumerate(questions):
            qwhere = f"{self.name}: questions[{qi}]"
            if not isinstance(q, dict):
                raise InvalidInput(f"expected a question object, got {_kind(q)}", where=qwhere)
            fields = {}
            for key in ("haystack_sessions", "haystack_dates", "haystack_session_ids"):
                if key not in q:
                    raise InvalidInput("is missing", where=f"{qwhere}.{key}")
                if not isinstance(q[key], list):
                    raise InvalidInput(f"must be a list, got {_kind(q[key])}", where=f"{qwhere}.{key}")
                fields[key] = q[key]
            n = len(fields["haystack_sessions"])
            for key in ("haystack_dates", "haystack_session_ids"):
                if len(fields[key]) != n:
                    raise InvalidInput(
                        f"has {len(fields[key])} entries but haystack_sessions has {n}",
                        where=f"{qwhere}.{key}",
                    )
            for si, (sid, date, msgs) in enumerate(
                zip(
                    fields["haystack_session_ids"],
                    fields["haystack_dates"],
                    fields["haystack_sessions"],
                    strict=True,
                )
            ):
                sid_where = f"{qwhere}.haystack_session_ids[{si}]"
                session_id = _session_id(sid, sid_where)
                if session_id in seen:
                    continue
                seen.add(session_id)
                when = parse_date(date, where=f"{qwhere}.haystack_dates[{si}]")
                messages = _messages(msgs, f"{qwhere}.haystack_sessions[{si}]")
                yield SessionInput(session_id=session_id, date=when, messages=messages)

    def _messages(self, doc: Any, fallback: datetime | None) -> SessionInput:
        if not isinstance(doc, list):
            raise InvalidInput(f"expected a JSON list of messages, got {_kind(doc)}", where=self.name)
        session_id = _session_id(self.stem, f"{self.name}: session id (taken from the file name)")
        when = fallback or self.mtime
        if when is None:
            raise InvalidInput("a message list needs a date: pass --date", where=self.name)
        return SessionInput(
            session_id=session_id, date=when, messages=_messages(doc, f"{self.name}: messages")
        )


class _ReadErrors:
    """Turns decoding failures (bad gzip, bad UTF-8, truncated streams) into ``InvalidInput`` naming the file."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __enter__(self) -> None:
        return None

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: object
    ) -> Literal[False]:
        if exc is None or isinstance(exc, InvalidInput | GeneratorExit):
            return False
        if isinstance(exc, UnicodeDecodeError):
            raise InvalidInput(f"is not UTF-8 text (byte {exc.start})", where=self.name) from None
        if isinstance(exc, zipfile.BadZipFile):
            raise InvalidInput(f"is a damaged zip file ({exc})", where=self.name) from None
        if isinstance(exc, gzip.BadGzipFile | EOFError | zlib.error):
            raise InvalidInput(f"is a damaged gzip file ({exc})", where=self.name) from None
        if isinstance(exc, OSError):
            raise InvalidInput(f"cannot be read ({exc})", where=self.name) from None
        return False


def _loads(text: str, where: str, *, one_line: bool = False) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        at = f"column {e.colno}" if one_line else f"line {e.lineno}, column {e.colno}"
        raise InvalidInput(f"is not valid JSON ({at}: {e.msg})", where=where) from None
    except RecursionError:
        raise InvalidInput("is nested too deeply to be a chat history", where=where) from None


def _detect_list(doc: Any, name: str) -> Format:
    if not isinstance(doc, list):
        raise InvalidInput(f"expected a JSON list, got {_kind(doc)}", where=name)
    if not doc:
        raise InvalidInput("the list is empty: there is nothing to ingest", where=name)
    first = doc[0]
    if (service := export_service(first)) is not None:
        return service
    if isinstance(first, dict):
        if "haystack_sessions" in first:
            return "longmemeval"
        if "messages" in first or "session_id" in first:
            return "json"
        if "role" in first or "content" in first:
            return "messages"
    raise InvalidInput(
        "cannot tell the format: the first item has none of 'messages', 'role' or 'haystack_sessions'; "
        f"pass --format ({', '.join(FORMATS)})",
        where=f"{name}: [0]",
    )


def _session_id(value: Any, where: str) -> str:
    try:
        return validate_identifier(value, "session id")
    except ValueError as e:
        raise InvalidInput(str(e), where=where) from None


def _session(item: Any, where: str, fallback: datetime | None) -> SessionInput:
    if not isinstance(item, dict):
        raise InvalidInput(f"expected a session object, got {_kind(item)}", where=where)
    if "session_id" not in item:
        raise InvalidInput("is missing (every session needs an id)", where=f"{where}.session_id")
    session_id = _session_id(item["session_id"], f"{where}.session_id")
    if item.get("date") is not None:
        when = parse_date(item["date"], where=f"{where}.date")
    elif fallback is not None:
        when = fallback
    else:
        raise InvalidInput(
            "is missing (give each session an ISO-8601 date, or pass --date)", where=f"{where}.date"
        )
    if "messages" not in item:
        raise InvalidInput("is missing", where=f"{where}.messages")
    return SessionInput(
        session_id=session_id, date=when, messages=_messages(item["messages"], f"{where}.messages")
    )


def _unique(session: SessionInput, where: str, seen: dict[str, str]) -> SessionInput:
    """A file that names one session twice is ambiguous (which content wins?), so it is rejected."""
    first = seen.get(session.session_id)
    if first is not None:
        raise InvalidInput(
            f"session id {session.session_id!r} was already used at {first}", where=f"{where}.session_id"
        )
    seen[session.session_id] = where
    return session


def _messages(items: Any, where: str) -> list[Any]:
    """Check the common mistakes with precise messages, then let the library's validator check the rest.

    ``ingest`` is imported here rather than at the top because it brings the store's row types (Kuzu, PyArrow),
    which the command line's parser, reading only ``FORMATS``, must not pay for."""
    from graphrecall import ingest as ing

    if not isinstance(items, list):
        raise InvalidInput(f"must be a list of messages, got {_kind(items)}", where=where)
    if not items:
        raise InvalidInput("is empty: a session needs at least one message", where=where)
    for i, m in enumerate(items):
        w = f"{where}[{i}]"
        if not isinstance(m, Mapping):
            raise InvalidInput(f"expected a message object with role and content, got {_kind(m)}", where=w)
        for key in ("role", "content"):
            if key not in m:
                raise InvalidInput("is missing (every message needs role and content)", where=f"{w}.{key}")
        role, content = m["role"], m["content"]
        if not isinstance(role, str) or role not in _ROLES:
            raise InvalidInput(f"{role!r} is not one of {ing.ROLE_NAMES}", where=f"{w}.role")
        if not isinstance(content, str):
            raise InvalidInput(f"must be a string, got {_kind(content)}", where=f"{w}.content")
        if not content.strip():
            raise InvalidInput("is blank", where=f"{w}.content")
    try:
        return list(ing.validate_messages(items, where=where))
    except (TypeError, ValueError) as e:  # InvalidInput is a ValueError; anything else gets a location too
        if isinstance(e, InvalidInput):
            raise
        raise InvalidInput(str(e), where=where) from None
