"""labkit: the tested versions of what the notebooks build, one module per stage.

01_setup       config (settings, explain, doctor), models (Message, Reply, ScriptedModel), live (API adapters)
02_tools       tools (Tool, tool, ToolRegistry, execute, validate_arguments)
03_memory      memory, notes — import them as modules (`from labkit import memory`): `python -m labkit.memory`
               must not find memory already imported
04_loop        loop (run, RunResult, Guard), trace (Trace)
05_guardrails  guardrails (Budget, run_guarded, Permissions, Secrets, detect_injection)
06_rag         rag (chunks, BM25, fusion, library, tools), embed (MiniLM, cache, cosine, MMR), cite (context,
               claims, citations) — import them as modules: `from labkit import rag, embed, cite`
07_runtime     runtime (ToolRuntime, operation_id, reduce, run_agent)
"""
from .check import check
from .config import doctor, explain, load_settings, redact
from .errors import (BudgetExceeded, GuardrailTripped, LabkitError, ModelBehaviorError, ServiceError,
                     ToolError, UserError)
from .loop import STOP_REASONS, Decision, Guard, RunResult, run
from .guardrails import Budget, Guards, guards, run_guarded
from .live import ChatModel, ResponsesModel, connect, describe, request_preview
from .models import (Message, Reply, ScriptedModel, ToolCall, ToolSpec, Usage, call, incomplete, raw_call, say,
                     system, tool_message, turn, user)
from .runtime import Action, OperationStore, State, ToolRuntime, operation_id, reduce, run_agent
from .tools import (RISKS, ArgumentError, Tool, ToolRegistry, UnsupportedSchema, execute, parse_arguments, tool,
                    validate_arguments)
from .trace import Trace

__all__ = [
    "check", "doctor", "explain", "load_settings", "redact",
    "BudgetExceeded", "GuardrailTripped", "LabkitError", "ModelBehaviorError", "ServiceError", "ToolError",
    "UserError",
    "ChatModel", "Message", "Reply", "ResponsesModel", "ScriptedModel", "ToolCall", "ToolSpec", "Usage",
    "call", "connect", "describe", "incomplete", "raw_call", "request_preview", "say", "system", "tool_message",
    "turn", "user",
    "STOP_REASONS", "Decision", "Guard", "RunResult", "run",
    "RISKS", "ArgumentError", "Tool", "ToolRegistry", "UnsupportedSchema", "execute", "parse_arguments", "tool",
    "validate_arguments",
    "Budget", "Guards", "guards", "run_guarded",
    "Action", "OperationStore", "State", "ToolRuntime", "operation_id", "reduce", "run_agent",
    "Trace",
]
