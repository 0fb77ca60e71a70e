"""Hooks for coding agents: ``graphrecall hook EVENT`` reads the agent's hook JSON (Claude Code's) on stdin and
gives the agent its memory at a session's start and with each prompt, and stores the session's transcript as it
goes (docs/agents.md).

The modules, one job each: ``payload`` (the hook JSON), ``project`` (the user's and the project's scopes),
``transcript`` (new transcript lines as messages) with ``redact`` (secrets out), ``state`` (cursors and counted
errors under ``<root>/.hooks``), ``relevance`` (the measured threshold), ``render`` (the text the agent reads),
``events`` (what each event does over a ``Memory`` or a server), ``install`` (the settings snippet); the command
line is ``cli_hook``.
"""
