"""Whose memory a hook reads and writes: the user's scope, and the project's, named after the git root of ``cwd``.

A coding session is about a repository more than about a person, so its transcript is stored in the project's scope
(``<org>/_project-<name>``, ``<name>`` the git root's directory name: a shared scope, ``params.is_shared``, which
every key of the organisation may read and only a key with ``shared_write`` may change) and read back there by every
session in that repository; outside a repository it goes to the user's scope. The user's scope holds what is known
about the user (their profile). A prompt's context is searched in the user's scope together with the project's
(``HookScopes.also``: the shared scopes one search reads beside the user's).

The git root is found by walking up from ``cwd`` to a directory holding ``.git`` (a directory, or the file a
worktree or submodule has), without running git: a hook runs on every prompt and must not pay a process start.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from graphrecall.models import MAX_ID_LENGTH, Scope

PROJECT_PREFIX = "_project-"
_UNSAFE = re.compile(r"[^\w.+-]+")


@dataclass(frozen=True)
class HookScopes:
    user: Scope
    project: Scope | None
    project_name: str | None

    @property
    def memory(self) -> Scope:
        """Where the session's transcript is stored: the project's scope, else the user's."""
        return self.project or self.user

    @property
    def reads(self) -> list[Scope]:
        """Every scope a prompt's context is searched in: the user's, and the project's."""
        return [self.user, *([self.project] if self.project else [])]

    @property
    def also(self) -> list[str]:
        """The shared scopes searched together with the user's (``SearchParams.also``)."""
        return [self.project.user_id] if self.project else []


def git_root(cwd: Path) -> Path | None:
    """The nearest directory at or above ``cwd`` holding ``.git``, or ``None``."""
    try:
        here = cwd.expanduser().resolve()
    except OSError:
        return None
    for directory in (here, *here.parents):
        if (directory / ".git").exists():
            return directory
    return None


def project_user(name: str) -> str:
    """The user id of a project's scope: the name with anything a scope id may not hold replaced by '-'."""
    safe = _UNSAFE.sub("-", name).strip("-.") or "unnamed"
    return (PROJECT_PREFIX + safe)[:MAX_ID_LENGTH]


def scopes_for(org: str, user: str, cwd: str | None) -> HookScopes:
    """The user's scope and, when ``cwd`` is inside a git repository, the project's."""
    root = git_root(Path(cwd)) if cwd else None
    project = Scope(org_id=org, user_id=project_user(root.name)) if root is not None else None
    return HookScopes(
        user=Scope(org_id=org, user_id=user), project=project, project_name=root.name if root else None
    )
