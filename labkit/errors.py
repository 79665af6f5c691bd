"""Errors named for whose fault they are.

Built in 01_setup. The name of an error tells the reader who has to act:

    LabkitError               anything labkit raises on purpose
    ├── UserError             the caller (you) misused labkit or misconfigured it: fix your code or .env
    ├── ServiceError          the model service failed or could not be reached: wait, retry, check the URL
    ├── ModelBehaviorError    the model produced output labkit cannot use: feed it back as an observation
    ├── ToolError             a tool failed while running: the loop turns it into a result the model reads
    ├── BudgetExceeded        a turn, call, token or cost budget ran out: the run stops cleanly
    └── GuardrailTripped      a guardrail stopped the run (repeat, permission, injection, ...)

Every message is one line, "what happened — what to do", and never contains a key: the
constructor scrubs its arguments with labkit.config.redact (every configured key, anything
key-like). An error that replaces another is raised outside the `except` block that caught it, so
the original (which may quote a key) is not its __context__ (see labkit.config.call_service).
"""


class LabkitError(Exception):
    """Base class: something labkit detected and can explain in one line."""

    def __init__(self, *args):
        from .config import redact           # subtle: imported here, as config imports this module
        super().__init__(*(redact(arg) for arg in args))


class UserError(LabkitError):
    """The caller misused labkit (bad argument, bad setting, missing key). Raise; do not retry."""


class ServiceError(LabkitError):
    """The model service failed or was unreachable (429, 5xx, timeout, connection refused).

    `status` is the HTTP status code when there was one, else None.
    """

    def __init__(self, message, status=None):
        super().__init__(message)
        self.status = status


class ModelBehaviorError(LabkitError):
    """The model said something unusable (empty, truncated, malformed). Not a bug in your code."""


class ToolError(LabkitError):
    """A tool failed. `kind` is a short machine-readable reason, e.g. "not_found"."""

    def __init__(self, message, kind="tool_error"):
        super().__init__(message)
        self.kind = kind


class BudgetExceeded(LabkitError):
    """A budget (turns, tool calls, tokens, cost) is used up. `budget` names which one."""

    def __init__(self, message, budget=None):
        super().__init__(message)
        self.budget = budget


class GuardrailTripped(LabkitError):
    """A guardrail stopped the run. `reason` is a stop reason such as "repeated_action"."""

    def __init__(self, message, reason=None):
        super().__init__(message)
        self.reason = reason
