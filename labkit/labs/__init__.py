# ruff: noqa: F401 (the names are re-exported: labkit.labs.X)
"""Lab harnesses: what the notebooks' Lab sections run that is not the lesson's own code.

Outside the lessons, never read as part of one. 04_loop: the frozen scenarios (data/evals/
loop_scenarios.json), their tools (with exchange_rate's deliberate bug) and the evaluation table.
05_guardrails: a pretend Workspace whose tools really run, an obedient model, attack and
exfiltration trials, detector scoring. 06_rag: the frozen query set and its ranking metrics.
08_context: the frozen long conversation, its probes and the three compaction strategies. 09_mcp:
hostile MCP servers (poisoning, rug pull, shadowing, confused deputy) and their trials.
02_tools: the frozen tool-call set's questions asked with three kinds of tool description.
10_evals: the frozen tool-call set and its table, the agent suite (and its tool_choice policy
table), the judges' human labels, plots.
Beside the hand-written pieces, what production runs: 03 the frozen memory set (data/evals/
memory_queries.json) in SQLite FTS5, 06 faiss IndexFlatIP, 07 the refund as a DBOS workflow.

The harnesses live in one module per lab, named for what they hold; everything is importable from
here (labkit.labs.X), as the notebooks do.
"""

from .conversation import (
    CONVERSATION,
    compaction_table,
    load_conversation,
    plot_sections,
    probes_kept,
)
from .dbos_refund import DBOS_POINTS, Bank, dbos_kill_trial, kill_points
from .descriptions import DescriptionReport, description_table, first_calls
from .evalsets import (
    AGENT_SUITE,
    BFCL_TYPES,
    JUDGE_LABELS,
    TOOL_CALLS,
    Suite,
    ToolCallReport,
    bfcl_tool,
    load_judge_labels,
    load_suite,
    load_tool_cases,
    model_calls,
    plot_cost,
    plot_success,
    tool_call_table,
)
from .faiss_search import faiss_index, faiss_top_k
from .fts5 import (
    MEMORY_QUERIES,
    FTS5Index,
    load_memory_set,
    memory_recall_table,
    recall_cost,
    synthetic_memories,
)
from .hostile import (
    DEPUTY_PAGE,
    MCP_ATTACKS,
    POISON,
    PRIVATE_NOTE,
    RUG_PULL,
    McpWorld,
    flat,
    mcp_trial,
    obey,
    trusting,
)
from .queries import eval_table, evaluate_retrieval, load_queries, rank_metrics
from .scenarios import (
    RATES,
    SCENARIOS,
    Scenario,
    ScenarioReport,
    evaluate_scenarios,
    exchange_rate,
    load_scenarios,
    run_scenario,
    scenario_tools,
    script_step,
    succeeded,
)
from .tool_choice import POLICIES, PolicyReport, calls_made, first_tool, policy_table
from .workspace import (
    EXFILTRATION,
    INJECTIONS,
    DetectorScore,
    Trial,
    Workspace,
    attack_trial,
    exfiltration_trial,
    load_exfiltration,
    load_injections,
    obedient,
    score_detector,
    shown_text,
)
