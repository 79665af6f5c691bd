"""Permissions: who may run what — a delegated max risk, a person's approval, the egress rule.

Built in 05_guardrails. `Permissions` is a Guard: a tool above the delegated max risk never runs;
a high-risk tool runs only after a person says an explicit yes (`approved`, the one consent rule),
and so does a tool that sends data off the machine once untrusted content has entered the run,
unless every host it names is allow-listed. `approval_question` shows the person every argument.
Left out, and what production uses instead: egress is checked from each tool's own declaration
here; production enforces it in the network too (an egress proxy with an allow-list, a sandbox
with no network) and separates plans from data.
"""

import json
import re
from collections.abc import Callable, Iterable
from urllib.parse import urlsplit

from .errors import UserError
from .injection import UNTRUSTED
from .loop import Decision, Guard, RunResult
from .models import ToolCall
from .schema import ArgumentError, parse_arguments
from .tools import RISKS, Tool, approved, risk_above
from .trace import describe_call


def _shown_value(value, width):
    """One argument value as JSON on one line, clipped on its own and marked when clipped."""
    if isinstance(value, str) and len(value) > width:
        return (
            f"{json.dumps(value[:width], ensure_ascii=False)}… (clipped: first {width} of "
            f"{len(value)} characters)"
        )
    text = json.dumps(value, ensure_ascii=False)
    return (
        text
        if len(text) <= width
        else f"{text[:width]}… (clipped: first {width} of {len(text)} characters)"
    )


def approval_question(call: ToolCall, tool: Tool, width: int = 80) -> str:
    """What the person is asked: every argument on its own line, each value clipped separately, and
    where the data goes when the tool sends it off the machine.

    One clip over the whole call would let a long first argument push `to` out of sight; values are
    JSON-encoded, so a newline inside one cannot fake another argument's line.
    Example: approval_question(call, send_email)
             ->  'Allow send_email (high risk)?\n  to: "ana@example.com"...'
    """
    try:
        arguments = parse_arguments(call.arguments)
        lines = [
            f"  {k if re.fullmatch(r'[A-Za-z_][A-Za-z0-9_]{0,39}', k) else _shown_value(k, 40)}: "
            f"{_shown_value(v, width)}"
            for k, v in arguments.items()
        ]
    except ArgumentError:
        lines = [f"  arguments that do not parse: {_shown_value(call.arguments, width)}"]
    if tool.egress:
        lines.append(f"  it sends data off the machine, to: {_where(destinations(call, tool))}")
    return "\n".join([f"Allow {tool.name} ({tool.risk} risk)?", *lines, "(yes/no)"])


class Permissions(Guard):
    """Tools above the delegated max risk never run; high-risk tools run only after a person says
    yes, and so do egress tools once untrusted content has entered the run, unless every place they
    send data to is allow-listed (private data, untrusted text and a way out never meet unasked).

    approve(call, tool) is asked (show it approval_question(call, tool)); without one, on any
    answer but yes, or if it raises, the call is refused (fail closed). Every decision is logged:
    allow within_risk, allow_listed or approved; refuse not_permitted, not_approved, approval_error.
    """

    def __init__(
        self,
        max_risk: str = "low",
        approve: Callable[[ToolCall, Tool], object] | None = None,
        allowed_hosts: Iterable[str] | None = (),
    ) -> None:
        if max_risk not in RISKS:
            raise UserError(f"max_risk {max_risk!r} is not one of {', '.join(RISKS)}")
        self.max_risk, self.approve = max_risk, approve
        self.allowed_hosts = check_hosts(allowed_hosts)

    def before_tool(self, run: RunResult, call: ToolCall, tool: Tool | None) -> Decision | None:
        if tool is None or call.problem:
            return None  # it never runs: execute() refuses it
        if risk_above(tool.risk, self.max_risk):
            said = (
                f"{tool.name} is {tool.risk} risk and this run may use tools up to "
                f"{self.max_risk} risk — it was not run; do the task without it or tell the user"
            )
            return Decision("refuse", "not_permitted", said)
        hosts = outbound(run.messages, call, tool)  # None unless data leaves after untrusted text
        listed = bool(hosts and all(allow_listed(h, self.allowed_hosts) for h in hosts))
        if tool.risk != "high" and (hosts is None or listed):
            said = f"{tool.name} is {tool.risk} risk, within max_risk {self.max_risk}"
            reason = "allow_listed" if listed else "within_risk"
            return Decision("allow", reason, said + _egress_note(tool, listed))
        return self._ask(call, tool, _not_listed(hosts, listed))

    def _ask(self, call, tool, why):
        """A person decides: only an explicit yes approves; no callback, or one that raises: no."""
        try:
            answer = self.approve(call, tool) if self.approve else None
        except Exception as exc:  # a broken approval prompt must not mean yes — nor read as a no
            said = (
                f"the approval callback raised {type(exc).__name__} — {tool.name} was not run; "
                "do not retry it; tell the user it could not be approved"
            )
            return Decision("refuse", "approval_error", said)
        if approved(answer):
            return Decision("allow", "approved", f"the user approved {describe_call(call)}{why}")
        asked = "no one was asked (no approve callback)"
        if self.approve is not None:
            asked = "the user did not approve it"
        said = (
            f"{tool.name} was not run{why}: {asked} — do not retry it; tell the user what you "
            "would have done"
        )
        return Decision("refuse", "not_approved", said)


def _not_listed(hosts, listed) -> str:
    """Why a person is asked, when it is egress: where the data would go ("" when not that)."""
    if hosts is None or listed:
        return ""
    return (
        f" (it would send data to {_where(hosts)}, which is not allow-listed, after "
        "untrusted content)"
    )


# ---------------------------------------------------------------- data leaving the machine (egress)

_MAILBOX = re.compile(r"[A-Za-z0-9._+-]+")  # an address's local part, with nothing a URL reads
_DNS_LABEL = r"[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?"
_HOST = re.compile(rf"(?=.{{1,253}}$){_DNS_LABEL}(\.{_DNS_LABEL})*")
_UNPLAIN = re.compile(r"[\s\\\x00-\x1f\x7f]")  # spaces, backslashes, control characters


def read_untrusted(messages: list) -> bool:
    """Whether untrusted content has entered the run: any tool result (a guard's refusal too: it
    may echo a page's words), or text labelled by untrusted(). Example: read_untrusted(messages)"""
    label = json.dumps({"untrusted": UNTRUSTED.split("{source}")[0]})[1:-2]  # how each label starts
    return any(m.role == "tool" or label in (m.content or "") for m in messages)


def outbound(messages: list, call: ToolCall, tool: Tool) -> list | None:
    """The hosts an egress call would send data to once untrusted content is in the run; else None.

    Example: outbound(run.messages, call, get_webpage)  ->  ["exfil.example"]
    """
    if not tool.egress or not read_untrusted(messages):
        return None
    return destinations(call, tool)


def destinations(call: ToolCall, tool: Tool) -> list:
    """The hosts an egress call names in the arguments its tool declares (None for a value that
    names no host plainly); [] when no argument says where. Example: destinations(call, tool)"""
    if not isinstance(tool.egress, tuple):
        return []
    try:
        arguments = parse_arguments(call.arguments)
    except ArgumentError:
        return [None]
    values = [arguments.get(name) for name in tool.egress]
    return [
        destination_host(v)
        for value in values
        if value is not None
        for v in (value if isinstance(value, list) else [value])
    ]


def destination_host(value: object) -> str | None:
    """The host a destination names — an http(s) URL, an e-mail address or a bare host — in lower
    case; None when it names none plainly (userinfo, a backslash, spaces, other schemes, non-ASCII).

    subtle: strict on purpose. Parsers disagree about `https://a.example\\@b.example` and its kin,
    so what is not plain is never allow-listed: a person is asked instead.
    Example: destination_host("https://Docs.Example.org:8443/a?b=c")  ->  "docs.example.org"
    """
    if not isinstance(value, str) or not value.isascii() or _UNPLAIN.search(value):
        return None
    if "://" in value:
        parts = urlsplit(value)
        try:
            _ = parts.port  # a port that is not a number: not plain
        except ValueError:
            return None
        if parts.scheme.lower() not in ("http", "https") or "@" in parts.netloc:
            return None
        host = parts.hostname or ""
    elif value.count("@") == 1:  # an e-mail address: its domain
        mailbox, host = value.split("@")
        if not _MAILBOX.fullmatch(mailbox):
            return None
    else:
        host = value
    host = host.lower().removesuffix(".")
    return host if _HOST.fullmatch(host) else None


def check_hosts(allowed_hosts: Iterable[str] | None) -> tuple[str, ...]:
    """The allow-list in lower case. An entry allows exactly that host; "*.example.org" allows every
    host below example.org, not example.org itself. Example: check_hosts(["Docs.Python.org"])"""
    if allowed_hosts is None:
        return ()
    if not isinstance(allowed_hosts, (list, tuple, set, frozenset)):  # one string is not a list
        raise UserError(
            f"allowed_hosts={allowed_hosts!r} is not a list of hosts — pass one, e.g. "
            "['docs.python.org']"
        )
    hosts = []
    for entry in allowed_hosts:
        host = entry.lower().removesuffix(".") if isinstance(entry, str) else ""
        if not _HOST.fullmatch(host.removeprefix("*.")):
            raise UserError(
                f"allowed_hosts entry {entry!r} is not a host — write the host alone, "
                "e.g. 'docs.python.org', or '*.python.org' for every host below it"
            )
        hosts.append(host)
    return tuple(hosts)


def allow_listed(host: str | None, allowed_hosts: Iterable[str] | None) -> bool:
    """Whether a host is on the allow-list: equal to an entry, or below a "*." entry; no substrings.

    Example: allow_listed("docs.example.org.exfil.example", ["docs.example.org"])  ->  False
    """
    entries = check_hosts(allowed_hosts)
    return host is not None and any(
        host == e or (e[:2] == "*." and host.endswith(e[1:])) for e in entries
    )


def _where(hosts):
    named = [h or "a destination that is not a plain host" for h in hosts]
    return ", ".join(named) or "a place no argument names"


def _egress_note(tool, listed):
    if listed:
        return "; it sends data only to allow-listed hosts"
    return "; it sends data out, and nothing untrusted is in the run yet" if tool.egress else ""
