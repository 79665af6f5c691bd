"""labkit: the tested versions of what the notebooks build, one module per lesson.

01_setup       config (settings, doctor), errors (errors, explain), models (Message, Reply,
               ScriptedModel, to_api), live (API adapters, connect), trace (Trace)
02_tools       schema (parse, validate, canonical), tools (Tool, tool, ToolRegistry, execute,
               approved), toolbox (calculate, get_weather, read_doc)
03_memory      memory, notes — import them as modules (`from labkit import memory`); the command
               line is `python -m labkit memory`
04_loop        loop (run, RunResult, Guard), patterns (run_react, plan_and_execute)
05_guardrails  budget (Budget, PRICES), guardrails (run_guarded, Permissions, Secrets,
               detect_injection)
06_rag         rag (chunks, BM25, fusion, library, tools), embed (MiniLM, cache, cosine, MMR),
               cite (context, claims, citations) — import them as modules
07_runtime     runtime (ToolRuntime, operation_id, reduce, run_agent)
Outside the lessons: check (the checker), tasks (the hands-on tasks), labs (lab harnesses).
"""

from .budget import Budget
from .check import check
from .config import load_settings, redact
from .errors import (
    GuardrailTripped,
    LabkitError,
    ModelBehaviorError,
    ServiceError,
    ToolError,
    UserError,
    explain,
)
from .guardrails import Guards, guards, run_guarded
from .live import ChatModel, ResponsesModel, connect, describe, doctor, request_preview
from .loop import STOP_REASONS, Decision, Guard, RunResult, run
from .models import (
    Message,
    Reply,
    ScriptedModel,
    ToolCall,
    ToolSpec,
    Usage,
    call,
    incomplete,
    raw_call,
    say,
    system,
    tool_message,
    turn,
    user,
)
from .runtime import Action, OperationStore, State, ToolRuntime, operation_id, reduce, run_agent
from .schema import ArgumentError, UnsupportedSchema, parse_arguments, validate_arguments
from .tools import RISKS, Tool, ToolRegistry, execute, tool
from .trace import Trace

__all__ = [
    "check",
    "doctor",
    "explain",
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
    "Reply",
    "ResponsesModel",
    "ScriptedModel",
    "ToolCall",
    "ToolSpec",
    "Usage",
    "call",
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
