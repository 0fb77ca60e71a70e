"""The bodies only HTTP has: the error envelope and the health answer.

Requests are the parameter models of ``graphrecall.params`` and answers the results of ``graphrecall.operations``
(domain models from ``graphrecall.models``, list envelopes from ``graphrecall.results``), so the HTTP schema
cannot drift from the library's.
"""

from __future__ import annotations

from pydantic import BaseModel, Field


class HealthResponse(BaseModel):
    status: str


class ErrorDetail(BaseModel):
    code: str = Field(
        description="stable: invalid_input, unauthorized, forbidden, not_found, method_not_allowed, "
        "payload_too_large, not_available, store_busy, internal"
    )
    message: str
    field: str | None = Field(default=None, description="the offending input, e.g. messages[0].content")


class ErrorResponse(BaseModel):
    error: ErrorDetail
