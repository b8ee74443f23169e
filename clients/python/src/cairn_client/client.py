"""``Cairn`` (sync) and ``AsyncCairn``: typed methods for every operation of the API.

- Configured from ``CAIRN_URL`` / ``CAIRN_TOKEN`` unless given.
- Retries connection errors and 429/500/502/503/504 with exponential backoff (and the
  server's ``Retry-After``), with one ``Idempotency-Key`` per write kept across its
  retries, so a retry never doubles a write.
- Errors raise one type, :class:`CairnError`, carrying the server's ``code``,
  ``message`` and ``fields``.
- Project inputs (``project_remote`` / ``project_path``) come from the working
  directory's git remote (its path as fallback) unless given.
"""

from __future__ import annotations

import asyncio
import os
import random
import time
import uuid
from typing import Any
from urllib.parse import quote

import httpx

from cairn_client.operations import OPERATIONS
from cairn_client.project import project_fields

RETRY_STATUSES = {429, 500, 502, 503, 504}
WRITE_METHODS = {"POST", "PUT", "PATCH", "DELETE"}
# Operations that name a project: the client fills it in from the working directory.
PROJECT_OPERATIONS = {"context_get", "lesson_check", "lesson_create", "outcome_create"}


class CairnError(Exception):
    """An error answer from Cairn (or no answer at all: ``code`` ``unreachable``)."""

    def __init__(self, message: str, *, code: str, status: int | None, fields=None):
        super().__init__(message)
        self.message = message
        self.code = code
        self.status = status
        self.fields = fields or {}

    def __str__(self) -> str:
        where = f" (HTTP {self.status})" if self.status else ""
        return f"{self.code}{where}: {self.message}"


def _error_from(response: httpx.Response) -> CairnError:
    try:
        body = response.json()
    except ValueError:
        body = {}
    error = body.get("error") if isinstance(body, dict) else None
    if isinstance(error, dict):
        return CairnError(
            str(error.get("message") or response.reason_phrase),
            code=str(error.get("code") or "error"),
            status=response.status_code,
            fields=error.get("fields") or {},
        )
    return CairnError(
        response.text[:500] or response.reason_phrase, code="error", status=response.status_code
    )


def _clean(values: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in values.items() if value is not None}


class _Operations:
    """The typed methods, shared by the sync and async clients: each returns what
    ``self._call`` returns (the decoded body, or an awaitable of it)."""

    project_remote: str | None
    project_path: str | None

    def _call(self, operation_id: str, *, path=None, params=None, json=None):  # pragma: no cover
        raise NotImplementedError

    def _project(self) -> dict[str, str]:
        return project_fields(remote=self.project_remote, path=self.project_path)

    # -- identity and tools
    def whoami(self):
        return self._call("api_v1_agents_me_retrieve")

    def tools(self):
        return self._call("agent_tools_retrieve")

    def declare_tools(self, tools: list[dict]):
        return self._call("agent_tools_replace", json={"tools": tools})

    def health(self):
        return self._call("healthz_retrieve")

    # -- knowledge and recall
    def remember(self, content: str, *, category: str = "fact", **fields):
        return self._call(
            "knowledge_remember", json={"content": content, "category": category, **fields}
        )

    def remember_many(self, items: list[dict]):
        return self._call("knowledge_remember_batch", json={"items": items})

    def knowledge(self, **filters):
        return self._call("knowledge_list", params=_clean(filters))

    def knowledge_item(self, item_id: int):
        return self._call("knowledge_read", path={"item_id": item_id})

    def update_knowledge(self, item_id: int, **changes):
        return self._call("knowledge_update", path={"item_id": item_id}, json=changes)

    def forget(self, item_id: int):
        return self._call("knowledge_forget", path={"item_id": item_id})

    def recall(self, query: str, **options):
        """Hybrid recall. Options: context, category, entity, top_k, time_from, time_to,
        include_sensitive, embedding, sources ("knowledge" | "turns" | "both"; hits say
        their ``kind``)."""
        return self._call("recall", json={"query": query, **_clean(options)})

    # -- conversations and tool calls
    def store_turn(self, session_id: str, *, role: str, content: str, turn_index: int, **fields):
        body = {"role": role, "content": content, "turn_index": turn_index, **_clean(fields)}
        return self._call("session_turn_store", path={"session_id": session_id}, json=body)

    def turns(self, session_id: str, **params):
        return self._call("session_turns_list", path={"session_id": session_id}, params=params)

    def search_conversations(self, q: str, **params):
        """Hybrid search of past turns. Params: session_id, context, role, time_from,
        time_to, limit, offset, group ("turn" | "session": ranked ``sessions``),
        neighbours (0-3 turns around each hit)."""
        return self._call("conversations_search", params={"q": q, **_clean(params)})

    def log_tool_calls(self, calls: list[dict]):
        return self._call("tool_calls_log", json={"calls": calls})

    def tool_stats(self, **params):
        return self._call("tool_calls_stats", params=_clean(params))

    # -- outcomes, evidence, context, lessons
    def post_outcome(self, outcome: dict):
        return self._call("outcome_create", json={**self._project(), **outcome})

    def post_evidence(self, *, evidence_id: str, kind: str, target_type: str, target_id: int):
        body = {
            "evidence_id": evidence_id,
            "kind": kind,
            "target_type": target_type,
            "target_id": target_id,
        }
        return self._call("evidence_create", json=body)

    def context(self, **params):
        return self._call("context_get", params={**self._project(), **_clean(params)})

    def lessons_check(self, operation_key: str, **params):
        query = {**self._project(), "operation_key": operation_key, **_clean(params)}
        return self._call("lesson_check", params=query)

    def check_action(
        self, command: str, *, session_id: str = "", in_play: list = (), **fields
    ) -> dict:
        """The action gate: ``{decision: allow|ask|deny, reasons, reach, check_id}``."""
        body = {
            **self._project(),
            "command": command,
            "session_id": session_id,
            "in_play": list(in_play),
            **_clean(fields),
        }
        return self._call("action_check", json=body)

    def answer_action(self, check_id: int, answer: str) -> dict:
        """The person's answer to an ``ask``: ``allow_once``, ``always`` or ``deny``."""
        return self._call("action_answer", path={"check_id": check_id}, json={"answer": answer})

    def lessons(self, **params):
        return self._call("lesson_list", params=_clean(params))

    def propose_lesson(self, text: str, operation_key: str, *, evidence: list[int] = (), **fields):
        body = {
            **self._project(),
            "text": text,
            "operation_key": operation_key,
            "evidence": list(evidence),
            **fields,
        }
        return self._call("lesson_create", json=body)

    def lesson(self, lesson_id: int):
        return self._call("lesson_get", path={"lesson_id": lesson_id})

    def edit_lesson(self, lesson_id: int, **changes):
        return self._call("lesson_edit", path={"lesson_id": lesson_id}, json=changes)

    def retire_lesson(self, lesson_id: int, *, reason: str = ""):
        return self._call("lesson_retire", path={"lesson_id": lesson_id}, json={"reason": reason})

    def lesson_history(self, lesson_id: int):
        return self._call("lesson_history", path={"lesson_id": lesson_id})

    # -- skills, deltas, facts, feedback
    def register_skill(self, skill_md: str):
        return self._call("skills_register", json={"skill_md": skill_md})

    def skill(self, name: str):
        return self._call("skills_retrieve", path={"name": name})

    def deltas(self, name: str):
        return self._call("skill_deltas_list", path={"name": name})

    def propose_delta(
        self, name: str, *, kind: str, anchor: dict, payload: dict, provenance: dict, **fields
    ):
        body = {
            "kind": kind,
            "anchor": anchor,
            "payload": payload,
            "provenance": provenance,
            **fields,
        }
        return self._call("skill_deltas_create", path={"name": name}, json=body)

    def effective_skill(self, name: str, **params):
        return self._call("skill_effective_retrieve", path={"name": name}, params=_clean(params))

    def feedback(self, *, action_type: str, scope: str, positive: bool, **fields):
        body = {"action_type": action_type, "scope": scope, "positive": positive, **fields}
        return self._call("feedback_create", json=body)

    def facts(self, namespace: str):
        return self._call("facts_list", path={"namespace": namespace})

    def fact(self, namespace: str, key: str):
        return self._call("facts_retrieve", path={"namespace": namespace, "key": key})

    def put_fact(self, namespace: str, key: str, value, **fields):
        return self._call(
            "facts_put", path={"namespace": namespace, "key": key}, json={"value": value, **fields}
        )

    # -- situations: blockers the agent cannot fix
    def classify(self, **signals):
        return self._call("situation_classify", json=signals)

    def declare_situation(self, situation: dict, **fields):
        return self._call("situation_declare", json={"situation": situation, **fields})

    def post_result(self, turn_id: str, *, tool: str, ok: bool, **fields):
        body = {"tool": tool, "ok": ok, **fields}
        return self._call("turn_result_record", path={"turn_id": turn_id}, json=body)

    def known_blockers(self, *, machine: str, subjects: str | None = None):
        return self._call(
            "situations_known", params=_clean({"machine": machine, "subjects": subjects})
        )

    # -- admin scope: exports, erasures, jobs
    def export(self, selector: dict, *, format: str = "json"):
        return self._call("exports_start", json={"selector": selector, "format": format})

    def export_download(self, job_id: int):
        return self._call("exports_download", path={"job_id": job_id})

    def erasure_preview(self, selector: dict):
        return self._call("erasures_preview", json={"selector": selector})

    def erase(self, selector: dict, *, confirm: str, reason: str = ""):
        return self._call(
            "erasures_start", json={"selector": selector, "confirm": confirm, "reason": reason}
        )

    def job(self, job_id: int):
        return self._call("jobs_get", path={"job_id": job_id})

    def run_job(self, kind: str, **fields):
        return self._call("jobs_start", json={"kind": kind, **fields})


class _Base(_Operations):
    def __init__(
        self,
        url: str | None = None,
        token: str | None = None,
        *,
        timeout: float = 10.0,
        retries: int = 4,
        backoff: float = 0.25,
        project_remote: str | None = None,
        project_path: str | None = None,
        connect_timeout: float | None = None,
        deadline: float | None = None,
        incognito: bool = False,
        token_variable: str = "CAIRN_TOKEN",
        base_url: str | None = None,
        from_shell: bool = False,
    ):
        # ``base_url=`` is what httpx and most HTTP clients call it: the same thing.
        if url and base_url and url != base_url:
            raise TypeError("give the server's address once: url or base_url")
        url = url or base_url
        self.url = (url or os.environ.get("CAIRN_URL") or "http://localhost:8000").rstrip("/")
        self.token = token or os.environ.get("CAIRN_TOKEN") or ""
        if not self.token:
            # A command-line user sets a variable; only Python code can pass token=.
            how = f"set {token_variable}" if from_shell else f"pass token= or set {token_variable}"
            raise CairnError(f"No token: {how}.", code="no_token", status=None)
        self.timeout = timeout
        self.connect_timeout = connect_timeout
        # A time.monotonic() instant after which no request is started and none waits:
        # a hook must answer Claude Code quickly whatever the server does.
        self.deadline = deadline
        self.retries = retries
        self.backoff = backoff
        self.project_remote = project_remote
        self.project_path = project_path
        # Incognito: every write says so (the server records nothing and answers 202)
        # and every read asks not to be counted as use.
        self.incognito = incognito

    def _after(self, attempt: int, response, failure):
        """After one attempt: ``(True, answer)`` to return it, or ``(False, delay)`` to try
        again after ``delay`` seconds; raises when the server cannot be reached and no
        try (or no time before the deadline) is left. One policy for both clients."""
        if failure is not None:
            if attempt == self.retries:
                raise CairnError(
                    f"Cannot reach {self.url}: {failure}", code="unreachable", status=None
                ) from failure
        elif response.status_code not in RETRY_STATUSES or attempt == self.retries:
            return True, self._decode(response)
        delay = self._delay(attempt, response)
        if self.deadline is not None and time.monotonic() + delay >= self.deadline:
            if response is not None:
                return True, self._decode(response)
            raise CairnError(
                f"Cannot reach {self.url}: no time left to retry", code="unreachable", status=None
            )
        return False, delay

    def _timeout(self) -> httpx.Timeout:
        """The timeout of the next request: the client's, cut to what the deadline leaves."""
        total = self.timeout
        if self.deadline is not None:
            left = self.deadline - time.monotonic()
            if left <= 0.05:
                raise CairnError(
                    f"Cannot reach {self.url}: no time left for this call",
                    code="unreachable",
                    status=None,
                )
            total = min(total, left)
        connect = min(self.connect_timeout or total, total)
        return httpx.Timeout(total, connect=connect)

    def _incognito(self, method: str, params, json):
        if not self.incognito:
            return params, json
        # Reads say it in the query string, writes (and /recall/, a read sent as a POST)
        # in the body too.
        params = {**(params or {}), "incognito": "true"}
        if method in WRITE_METHODS and isinstance(json, dict):
            json = {**json, "incognito": True}
        return params, json

    def _prepare(
        self, operation_id: str, path: dict | None, idempotency_key: str | None = None
    ) -> tuple[str, str, dict]:
        method, template = OPERATIONS[operation_id]
        url = self.url + template.format(
            **{k: quote(str(v), safe="") for k, v in (path or {}).items()}
        )
        headers = {"Authorization": f"Bearer {self.token}", "Accept": "application/json"}
        if method in WRITE_METHODS:
            # One key per logical write, kept across its retries: the server replays it.
            headers["Idempotency-Key"] = idempotency_key or uuid.uuid4().hex
        return method, url, headers

    def _delay(self, attempt: int, response: httpx.Response | None) -> float:
        if response is not None and response.headers.get("Retry-After", "").isdigit():
            return min(float(response.headers["Retry-After"]), 30.0)
        return self.backoff * (2**attempt) * (1 + random.random() / 2)

    @staticmethod
    def _decode(response: httpx.Response):
        if response.status_code >= 400:
            raise _error_from(response)
        if not response.content:
            return {}
        if "json" in response.headers.get("content-type", ""):
            return response.json()
        return response.content


class Cairn(_Base):
    """The synchronous client. ``with Cairn() as cairn: cairn.recall("deploy")``."""

    def __init__(self, *args, transport: httpx.BaseTransport | None = None, **kwargs):
        super().__init__(*args, **kwargs)
        self._http = httpx.Client(timeout=self.timeout, transport=transport)

    def __enter__(self) -> Cairn:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        self._http.close()

    def request(
        self, operation_id: str, *, path=None, params=None, json=None, idempotency_key=None
    ):
        """Call one operation by its id. ``idempotency_key``: the key of a write sent
        again later (a kept turn), so the server replays it instead of doubling it."""
        method, url, headers = self._prepare(operation_id, path, idempotency_key)
        params, json = self._incognito(method, params, json)
        for attempt in range(self.retries + 1):
            response = failure = None
            try:
                response = self._http.request(
                    method, url, params=params, json=json, headers=headers, timeout=self._timeout()
                )
            except httpx.TransportError as exc:
                failure = exc
            done, value = self._after(attempt, response, failure)
            if done:
                return value
            time.sleep(value)
        raise AssertionError("unreachable")  # pragma: no cover

    def _call(self, operation_id: str, *, path=None, params=None, json=None):
        return self.request(operation_id, path=path, params=params, json=json)


class AsyncCairn(_Base):
    """The asynchronous client: the same methods, awaited."""

    def __init__(self, *args, transport: httpx.AsyncBaseTransport | None = None, **kwargs):
        super().__init__(*args, **kwargs)
        self._http = httpx.AsyncClient(timeout=self.timeout, transport=transport)

    async def __aenter__(self) -> AsyncCairn:
        return self

    async def __aexit__(self, *exc) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self._http.aclose()

    async def _call(self, operation_id: str, *, path=None, params=None, json=None):
        method, url, headers = self._prepare(operation_id, path)
        params, json = self._incognito(method, params, json)
        for attempt in range(self.retries + 1):
            response = failure = None
            try:
                response = await self._http.request(
                    method, url, params=params, json=json, headers=headers, timeout=self._timeout()
                )
            except httpx.TransportError as exc:
                failure = exc
            done, value = self._after(attempt, response, failure)
            if done:
                return value
            await asyncio.sleep(value)
        raise AssertionError("unreachable")  # pragma: no cover
