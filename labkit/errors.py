"""Errors named for whose fault they are.

Built in 01_setup. LabkitError is anything labkit raises on purpose; its name says who acts:
UserError (you misused labkit or misconfigured it: fix your code or .env), ServiceError (the model
service failed or was unreachable: wait, retry, check the URL), ModelBehaviorError (the model said
something unusable: feed it back), ToolError (a tool failed: the loop turns it into a result the
model reads), GuardrailTripped (a guardrail stopped the run). labkit.failures explains any
failure in one line. No message holds a key: every error scrubs its arguments with keys.redact.
"""

from typing import Any

from .keys import redact


class LabkitError(Exception):
    """Base class: something labkit detected and can explain in one line."""

    def __init__(self, *args: Any) -> None:
        super().__init__(*(redact(arg) for arg in args))


class UserError(LabkitError):
    """The caller misused labkit (bad argument, bad setting, missing key). Raise; do not retry."""


class ServiceError(LabkitError):
    """The model service failed or was unreachable (429, 5xx, timeout, connection refused).

    `status` is the HTTP status code when there was one, else None.
    """

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


class ModelBehaviorError(LabkitError):
    """The model said something unusable (empty, truncated, malformed). Not a bug in your code."""


class ToolError(LabkitError):
    """A tool failed. `kind` is a short machine-readable reason, e.g. "not_found"."""

    def __init__(self, message: str, kind: str = "tool_error") -> None:
        super().__init__(message)
        self.kind = kind


class GuardrailTripped(LabkitError):
    """A guardrail stopped the run. `reason` is a stop reason such as "repeated_action"."""

    def __init__(self, message: str, reason: str | None = None) -> None:
        super().__init__(message)
        self.reason = reason
