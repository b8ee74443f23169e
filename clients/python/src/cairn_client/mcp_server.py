"""``cairn-mcp``: Cairn's memory as MCP tools for a model (stdio, the official SDK).

It runs with an **agent-scoped** token (``CAIRN_TOKEN``): the model's tools may
remember, recall, read context and lessons, and propose lessons and deltas. It offers
no tool that reports outcomes or a person's confirmation (those belong to the harness)
and refuses to start with a harness or admin token, so nothing it offers can move a
confidence.

- Each tool answers in text only: Claude Code shows the model a result's
  ``structuredContent`` instead of its text when both are present, so the ids and
  fields the model needs are written into the text.
- It starts even when Cairn cannot be reached (each tool then answers with an error
  saying so, and the token's scope is checked on the first answer).
- ``--incognito`` (or ``CAIRN_INCOGNITO=1``): the whole session is incognito (writes
  record nothing, reads are not counted as use).
"""

from __future__ import annotations

import functools
import os
import sys
from typing import Any

from mcp.server.fastmcp import FastMCP
from mcp.server.fastmcp.exceptions import ToolError
from mcp.types import CallToolResult, TextContent

from cairn_client.client import Cairn, CairnError

INSTRUCTIONS = (
    "Cairn is your long-term memory. Call `context` at the start of a task for lessons "
    "and known errors in this project, `lessons_check` before a risky command, `recall` "
    "when you need a fact you may have stored, and `remember` for durable facts and "
    "preferences (never secrets). Lessons and skill changes you propose are claims until "
    "the harness or a person confirms them."
)

server = FastMCP("cairn", instructions=INSTRUCTIONS)
_client: Cairn | None = None
_scope_checked = False
INCOGNITO = {"on": False}


def client() -> Cairn:
    global _client
    if _client is None:
        try:
            _client = Cairn(retries=2, incognito=INCOGNITO["on"])
        except CairnError as exc:
            raise ToolError(f"Cairn is not configured: {exc.message}") from None
    return _client


def _result(text: str, data: Any = None) -> CallToolResult:
    """Text only: what Claude Code shows the model (see the module's docstring)."""
    return CallToolResult(content=[TextContent(type="text", text=text)])


def _scope_refusal(scope: str | None) -> str:
    return (
        f"refusing to work with a {scope}-scoped token. The MCP server is the model's tool: "
        "give it an agent-scoped token (the harness token must never reach the model)."
    )


def _call(fn, *args, **kwargs):
    global _scope_checked
    try:
        if not _scope_checked:
            scope = client().whoami().get("scope")
            if scope != "agent":
                raise ToolError(f"cairn-mcp is {_scope_refusal(scope)}")
            _scope_checked = True
        answer = fn(*args, **kwargs)
    except CairnError as exc:
        if exc.code == "unreachable":
            raise ToolError(
                f"Cairn is unreachable ({client().url}); nothing was read or stored. "
                "Go on without it."
            ) from None
        raise ToolError(f"Cairn refused: {exc.message} ({exc.code})") from None
    if isinstance(answer, dict) and answer.get("recorded") is False:
        raise Incognito
    return answer


class Incognito(Exception):
    """Cairn recorded nothing: the session is incognito."""


def tool(fn):
    """A model-facing tool; an incognito write answers that nothing was stored."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except Incognito:
            return _result("incognito session: nothing was stored")

    return server.tool()(wrapper)


@tool
def remember(
    content: str, category: str = "fact", context: str = "global", entity: str = ""
) -> CallToolResult:
    """Store one durable fact, preference, skill note or reminder (≤ 2,000 characters).
    Use it for things worth knowing next session; never for secrets (they are refused).
    Returns the item id, or the id of an existing item it duplicated."""
    body = _call(
        client().remember,
        content,
        category=category,
        context=context,
        **({"entity": entity} if entity else {}),
    )
    dedup = body.get("deduplicated_into")
    text = f"remembered as #{body['id']}" + (f" (merged into #{dedup})" if dedup else "")
    return _result(text, body)


@tool
def recall(
    query: str, context: str = "", category: str = "", top_k: int = 0, sources: str = ""
) -> CallToolResult:
    """Search your memory (meaning and words). Returns the best items, most relevant
    first, as `#id [category] content`. `sources`: knowledge (default), turns (past
    conversations) or both, merged in one ranking; turns show as `[session#turn]`.
    Recall never changes how much an item is trusted."""
    options = {
        "context": context or None,
        "category": category or None,
        "top_k": top_k or None,
        "sources": sources or None,
    }
    body = _call(client().recall, query, **options)
    lines = [
        f"[{hit['session_id']}#{hit['turn_index']}] {hit['content']}"
        if hit.get("kind") == "turn"
        else f"#{hit['id']} [{hit.get('category', '')}] {hit['content']}"
        for hit in body.get("results", [])
    ]
    return _result("\n".join(lines) or "nothing found", body)


@tool
def forget(item_id: int) -> CallToolResult:
    """Archive one memory item you stored (it stays in history, out of recall)."""
    body = _call(client().forget, item_id)
    return _result(f"#{item_id} archived", body or {"id": item_id, "status": "archived"})


@tool
def context(machine: str = "") -> CallToolResult:
    """The plan-time context for this project: lessons learned from verified outcomes,
    known errors and blockers, and standing memory. Call it once when a task starts."""
    body = _call(client().context, machine=machine or None)
    return _result(body.get("text") or "no context yet", body)


@tool
def lessons_check(operation_key: str) -> CallToolResult:
    """Before a risky operation (e.g. `pip:install`, `pytest:.`): the lessons, known
    errors and blockers for it in this project."""
    body = _call(client().lessons_check, operation_key)
    lines = [f"- {lesson['text']}" for lesson in body.get("lessons", [])]
    lines += [f"! {error.get('content', error)}" for error in body.get("errors", [])]
    return _result("\n".join(lines) or f"nothing known about {operation_key}", body)


@tool
def propose_lesson(text: str, operation_key: str) -> CallToolResult:
    """Propose a lesson (one imperative sentence about one operation). It is stored as a
    claim and is not served until the harness reports an outcome that confirms it."""
    body = _call(client().propose_lesson, text, operation_key)
    return _result(f"lesson #{body['id']} stored ({body.get('state')})", body)


@tool
def propose_delta(
    skill: str,
    kind: str,
    section: str,
    payload: dict,
    turns: list[str],
    rationale: str = "",
) -> CallToolResult:
    """Propose a change to a skill (`preference`, `example` or `tool-hint`) anchored to a
    section, citing the conversation turns (`session#index`, found with `cite_turns`)
    where the user asked for it, and in `rationale` why (one or two sentences). `payload`
    is an object, e.g. `{"body": "Escalate anything from the CFO after 48 hours."}`. A
    person reviews it before it takes effect; proposing the same change again only
    counts it on the pending one."""
    body = _call(
        client().propose_delta,
        skill,
        kind=kind,
        anchor={"section": section},
        payload=payload,
        provenance={"source": "user_instruction", "turns": turns},
        **({"rationale": rationale} if rationale else {}),
    )
    text = f"delta #{body['id']} {body.get('status')}"
    if body.get("proposals", 1) > 1:
        text += f" (proposed {body['proposals']} times; counted, not staged again)"
    for warning in body.get("warnings") or []:
        text += f"\n{warning}"
    return _result(text, body)


@tool
def cite_turns(words: str) -> CallToolResult:
    """The ids (`session#index`) of the user's own turns that say `words` (a few of the
    user's words), newest sessions first: what `propose_delta` cites as the person's
    instruction. Only turns the harness stored count as the user's words."""
    body = _call(client().search_conversations, words, role="user", limit=5)
    results = body.get("results", []) if isinstance(body, dict) else body
    lines = [
        f"{hit.get('session_id')}#{hit.get('turn_index')}: "
        f"{(hit.get('snippet') or hit.get('content') or '')[:200]}"
        for hit in results
    ]
    return _result("\n".join(lines) or "no user turn says that")


@tool
def effective_skill(name: str, session_id: str = "", goal: str = "") -> CallToolResult:
    """A skill as it applies now: its text with the learned adjustments a person approved."""
    body = _call(client().effective_skill, name, session_id=session_id or None, goal=goal or None)
    return _result(body.get("text", ""), body)


@tool
def search_conversations(q: str, group: str = "", neighbours: int = 0) -> CallToolResult:
    """Search past conversation turns by meaning and words; returns the best turns with
    their session. `group="session"` ranks sessions (their best turns listed);
    `neighbours` (0-3) adds the turns around each hit."""
    params = {"group": group or None, "neighbours": neighbours or None}
    body = _call(client().search_conversations, q, **params)
    results = body.get("results", body if isinstance(body, list) else [])
    lines = [
        f"[{hit.get('session_id')}#{hit.get('turn_index')}] {hit.get('snippet') or hit.get('content', '')}"
        for hit in results
    ]
    return _result(
        "\n".join(lines) or "nothing found", body if isinstance(body, dict) else {"results": body}
    )


def main(argv: list[str] | None = None) -> int:
    global _scope_checked
    args = sys.argv[1:] if argv is None else argv
    INCOGNITO["on"] = "--incognito" in args or os.environ.get(
        "CAIRN_INCOGNITO", ""
    ).strip().lower() in ("1", "true", "yes", "on")
    try:
        scope = client().whoami().get("scope")
    except ToolError as exc:  # no token
        print(f"cairn-mcp: {exc}", file=sys.stderr)
        return 1
    except CairnError as exc:
        if exc.code != "unreachable":
            print(f"cairn-mcp: {exc}", file=sys.stderr)
            return 1
        # Cairn is down for now: start anyway; each tool says so, and the token's
        # scope is checked on Cairn's first answer.
        print(f"cairn-mcp: {exc}; starting anyway", file=sys.stderr)
    else:
        if scope != "agent":
            print(f"cairn-mcp: {_scope_refusal(scope)}", file=sys.stderr)
            return 2
        _scope_checked = True
    server.run("stdio")
    return 0


if __name__ == "__main__":
    sys.exit(main())
