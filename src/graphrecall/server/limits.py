"""Request limits shared by the HTTP app and the ``serve`` argument parser.

A module of its own (not the package ``__init__``, not ``http.py``) so that argument parsing can show the default
without importing FastAPI, and nothing imports the package back.
"""

DEFAULT_MAX_BODY_BYTES = 2_000_000
