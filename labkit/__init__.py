"""labkit: the tested versions of what the notebooks build, one module per stage.

01_setup: config (settings, explain, doctor), models (Message, Reply, ScriptedModel), live (API adapters).
"""
from .check import check
from .config import doctor, explain, load_settings, redact
from .errors import (BudgetExceeded, GuardrailTripped, LabkitError, ModelBehaviorError, ServiceError,
                     ToolError, UserError)
from .live import ChatModel, ResponsesModel, connect, describe, request_preview
from .models import (Message, Reply, ScriptedModel, ToolCall, ToolSpec, Usage, call, incomplete, raw_call, say,
                     system, tool_message, turn, user)
from .trace import Trace

__all__ = [
    "check", "doctor", "explain", "load_settings", "redact",
    "BudgetExceeded", "GuardrailTripped", "LabkitError", "ModelBehaviorError", "ServiceError", "ToolError",
    "UserError",
    "ChatModel", "Message", "Reply", "ResponsesModel", "ScriptedModel", "ToolCall", "ToolSpec", "Usage",
    "call", "connect", "describe", "incomplete", "raw_call", "request_preview", "say", "system", "tool_message",
    "turn", "user",
    "Trace",
]
