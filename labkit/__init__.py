"""labkit: the tested versions of what the notebooks build, one module per lesson.

01_setup config, envfile, keys, providers, errors, failures, messages, models, wire, live, stream,
cassettes, trace   02_tools schema, tools, toolbox
03_memory memory, notes (import them as modules; command line: python -m labkit memory)
04_loop loop, patterns   05_guardrails budget, permissions, injection, guardrails
06_rag rag, bm25, embed, cite (import them as modules)   07_runtime runtime
08_context tokens, context, compaction, agents
09_mcp mcp, mcp_server (import them as modules: labkit.mcp.stdio([...]))
10_evals evals, suite, stats, judges (import them as modules; gate: python -m labkit evals run)
Outside the lessons: check (the checker), tasks (the hands-on tasks), labs (lab harnesses),
__main__ (command lines). The names below are the few a notebook uses most.
"""

# memory and the 06_rag modules are not imported here: torch loads only when 06_rag needs it, and
# the memory store only when a notebook asks for it
from .budget import Budget
from .check import check, progress
from .config import load_settings
from .errors import (
    GuardrailTripped,
    LabkitError,
    ModelBehaviorError,
    ServiceError,
    ToolError,
    UserError,
)
from .failures import explain
from .guardrails import Guards, guards, run_guarded
from .keys import redact
from .live import ChatModel, ResponsesModel, connect, describe, request_preview
from .loop import STOP_REASONS, Decision, Guard, RunResult, run
from .models import (
    Message,
    Model,
    OutputSchema,
    Reply,
    ScriptedModel,
    StreamingModel,
    ToolCall,
    ToolSpec,
    Usage,
    call,
    collect,
    incomplete,
    raw_call,
    say,
    system,
    tool_message,
    turn,
    user,
)
from .probe import doctor, probe
from .runtime import Action, OperationStore, State, ToolRuntime, operation_id, reduce, run_agent
from .schema import ArgumentError, UnsupportedSchema, parse_arguments, validate_arguments
from .tools import RISKS, Tool, ToolRegistry, execute, tool
from .trace import Trace

__all__ = [
    "check",
    "progress",
    "doctor",
    "explain",
    "probe",
    "load_settings",
    "redact",
    "GuardrailTripped",
    "LabkitError",
    "ModelBehaviorError",
    "ServiceError",
    "ToolError",
    "UserError",
    "ChatModel",
    "Message",
    "Model",
    "StreamingModel",
    "Reply",
    "ResponsesModel",
    "ScriptedModel",
    "ToolCall",
    "OutputSchema",
    "ToolSpec",
    "Usage",
    "call",
    "collect",
    "connect",
    "describe",
    "incomplete",
    "raw_call",
    "request_preview",
    "say",
    "system",
    "tool_message",
    "turn",
    "user",
    "STOP_REASONS",
    "Decision",
    "Guard",
    "RunResult",
    "run",
    "RISKS",
    "ArgumentError",
    "Tool",
    "ToolRegistry",
    "UnsupportedSchema",
    "execute",
    "parse_arguments",
    "tool",
    "validate_arguments",
    "Budget",
    "Guards",
    "guards",
    "run_guarded",
    "Action",
    "OperationStore",
    "State",
    "ToolRuntime",
    "operation_id",
    "reduce",
    "run_agent",
    "Trace",
]
