"""Your own agent in one short script: `python -m labkit agent` runs it; copy it to start yours.

It wires together what the stages built: connect() (01), two tools of your own (02), memory (03),
run_guarded (04, 05) and a read-eval-print loop in the terminal. `days_between` runs here;
`wikipedia_summary` calls a real HTTP API, so it is declared egress and high risk: it sends a
request only live, and only after you say yes. Offline a six-step script plays the model (it
reads each tool's result back to you) and says so. Outside the lessons. Left out: streaming, a
web page, retries; each line you type is one run, with the earlier ones as its history.
"""

import datetime
import json
import urllib.parse
import urllib.request

import labkit
from labkit.memory import MemoryStore, memory_tools
from labkit.permissions import approval_question

SUMMARY_URL = "https://en.wikipedia.org/api/rest_v1/page/summary/"


def relay(messages: list[labkit.Message], tools: list) -> labkit.models.Step:
    """Offline, the model reads the last tool result back to you: what it got, or what failed."""
    result = json.loads(messages[-1].content)
    said = json.dumps(result["data"], ensure_ascii=False) if result["ok"] else result["message"]
    return labkit.say(said)


SCRIPT = [  # offline: the model's side of three exchanges, whatever you type
    labkit.call("days_between", start="2026-01-01", end="2026-12-25"),
    relay,
    labkit.call("wikipedia_summary", title="Ada Lovelace"),
    relay,
    labkit.call("remember", id="name", content="My name is Ada.", kind="fact", importance=0.8),
    relay,
]
OFFLINE = (
    "offline: a scripted model plays the agent, no key, no network; it answers three lines, "
    "whatever they say (a date, an article, your name). For a real model set LABKIT_MODE=live "
    "and OPENAI_API_KEY in .env."
)


@labkit.tool
def days_between(start: str, end: str) -> dict:
    """How many days lie from one date to another (negative when end comes first).

    Args:
        start: the first date, as YYYY-MM-DD
        end: the second date, as YYYY-MM-DD
    """
    try:
        first, last = datetime.date.fromisoformat(start), datetime.date.fromisoformat(end)
    except ValueError:
        raise labkit.ToolError(
            "write both dates as YYYY-MM-DD, e.g. 2026-12-25", "bad_date"
        ) from None
    return {"days": (last - first).days}


def wikipedia(live: bool) -> labkit.Tool:
    """The HTTP tool: it sends the title to Wikipedia (egress), so you approve each call (high)."""

    @labkit.tool(risk="high", egress=True)
    def wikipedia_summary(title: str) -> dict:
        """The opening paragraph of an English Wikipedia article.

        Args:
            title: the article's exact title, e.g. "Ada Lovelace"
        """
        if not live:
            raise labkit.ToolError(
                "offline: no request was sent (LABKIT_MODE=live sends it)", "offline"
            )
        url = SUMMARY_URL + urllib.parse.quote(title.replace(" ", "_"))
        request = urllib.request.Request(url, headers={"User-Agent": "labkit-agent-example"})
        try:
            with urllib.request.urlopen(request, timeout=10) as response:
                page = json.load(response)
        except (OSError, ValueError) as exc:  # 404, no network, not JSON
            raise labkit.ToolError(f"no summary for {title!r} ({exc})", "not_found") from exc
        return {"title": page.get("title"), "summary": str(page.get("extract", ""))[:1500]}

    return wikipedia_summary


def ask(question: str) -> str:
    """Ask the person in the terminal; Ctrl+D is no answer (and no answer is never a yes)."""
    try:
        return input(f"{question} ")
    except EOFError:
        return ""


def main(db: str = "memory.sqlite3", tenant: str = "me") -> None:
    """Talk to your agent: each line is a task; an empty line or Ctrl+D ends the conversation.

    Example: main("memory.sqlite3")   # or, from the repository: python -m labkit agent
    """
    model = labkit.connect(script=SCRIPT)
    script = model if isinstance(model, labkit.ScriptedModel) else None
    live = script is None
    print(labkit.describe(model) if live else OFFLINE)
    with MemoryStore(db) as store:
        remember, recall = memory_tools(store, tenant, confirm=ask)
        tools = [wikipedia(live), days_between, remember, recall]
        history: list = []
        while (script is None or script.unused()) and (task := ask("you>").strip()):
            result = labkit.run_guarded(
                task, model, tools, max_risk="high", history=history,
                approve=lambda call, tool: ask(approval_question(call, tool)),
            )  # fmt: skip
            history = result.messages
            for done in result.completed:
                print(f"  ran {done}")
            print(f"agent> {result.answer or f'[{result.status}] {result.next_step}'}")
    if script is not None and not script.unused():
        print("That was the whole script.")


if __name__ == "__main__":
    main()
