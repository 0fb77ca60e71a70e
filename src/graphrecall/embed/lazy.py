"""Load a heavy thing once, on first use, from any thread; tell whoever listens that it is happening.

Embedding models and rerankers take seconds to load and import PyTorch. Loading them in a constructor makes every
command pay for them, including the ones that never embed (``stats``, ``export``, an error message). ``LoadOnce``
defers the load to the first call that needs the object, and counts loads process-wide so that tests can state
"this command loaded no model" without timing anything. A command line registers a listener to say "loading the
embedding model…" once on a terminal.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Generic, TypeVar

T = TypeVar("T")

_listeners: list[Callable[[str], None]] = []
_loads: dict[str, int] = {}
_registry_lock = threading.Lock()


def on_load(listener: Callable[[str], None]) -> Callable[[], None]:
    """Call ``listener(what)`` just before each load starts; returns a function that removes the listener."""
    with _registry_lock:
        _listeners.append(listener)

    def remove() -> None:
        with _registry_lock:
            if listener in _listeners:
                _listeners.remove(listener)

    return remove


def load_count(what: str | None = None) -> int:
    """How many loads of ``what`` (all kinds when ``None``) this process has started."""
    with _registry_lock:
        return sum(_loads.values()) if what is None else _loads.get(what, 0)


class LoadOnce(Generic[T]):
    """``get()`` runs ``load`` the first time (one thread loads, the others wait) and returns its result after.

    A load that raises is not remembered: the next ``get()`` tries again (a missing optional package can be
    installed without restarting a server)."""

    def __init__(self, load: Callable[[], T], *, what: str) -> None:
        self._load = load
        self.what = what
        self._value: T | None = None
        self._done = False
        self._lock = threading.Lock()

    @property
    def loaded(self) -> bool:
        return self._done

    def get(self) -> T:
        if not self._done:
            with self._lock:
                if not self._done:
                    with _registry_lock:
                        _loads[self.what] = _loads.get(self.what, 0) + 1
                        listeners = list(_listeners)
                    for listener in listeners:
                        listener(self.what)
                    self._value = self._load()
                    self._done = True
        return self._value  # type: ignore[return-value]  # set together with _done
