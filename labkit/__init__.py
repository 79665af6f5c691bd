"""labkit: the tested versions of what the notebooks build, one module per stage.

01_setup: config (settings, explain, doctor) and models (Message, Reply, ScriptedModel, live adapters).
"""
from .check import check
from .config import doctor, explain, load_settings, redact
from .errors import (BudgetExceeded, GuardrailTripped, LabkitError, ModelBehaviorError, ServiceError,
                     ToolError, UserError)
from .models import (ChatModel, Message, Reply, ResponsesModel, ScriptedModel, ToolCall, ToolSpec, Usage,
                     call, connect, describe, incomplete, raw_call, say, system, tool_message, turn, user)
from .trace import Trace

__all__ = [
    "check", "doctor", "explain", "load_settings", "redact",
    "BudgetExceeded", "GuardrailTripped", "LabkitError", "ModelBehaviorError", "ServiceError", "ToolError",
    "UserError",
    "ChatModel", "Message", "Reply", "ResponsesModel", "ScriptedModel", "ToolCall", "ToolSpec", "Usage",
    "call", "connect", "describe", "incomplete", "raw_call", "say", "system", "tool_message", "turn", "user",
    "Trace",
]
