"""What every agent-API module shares: fields, error documentation, pagination,
request helpers, project naming and job answers.

Resource modules import from here and never from each other, except where one
resource embeds another's shape (a routed fact in a delta answer, an erasure
receipt in a job answer).
"""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass

from django.conf import settings
from django.urls import reverse
from drf_spectacular.utils import OpenApiResponse, extend_schema_field, inline_serializer
from rest_framework import serializers, status
from rest_framework.response import Response
from rest_framework.validators import ProhibitSurrogateCharactersValidator

from memory.core.actors import Actor
from memory.lessons.outcomes import IN_PLAY_TYPES
from memory.models import EMBEDDING_DIMENSIONS
from memory.privacy.selection import Selector, selector_parse

# --------------------------------------------------------------------------- tags and limits

TAG_ADMIN = "admin"
TAG_CONVERSATIONS = "conversations"
TAG_FACTS = "facts"
TAG_HEALTH = "health"
TAG_IDENTITY = "identity"
TAG_KNOWLEDGE = "knowledge"
TAG_LESSONS = "lessons"
TAG_OUTCOMES = "outcomes"
TAG_SKILLS = "skills"

OFFSET_MAX = 1_000_000
INT_MAX = 2_147_483_647
BIGINT_MAX = 9_223_372_036_854_775_807

# Reads (recall, context, the lesson check, the effective skill) take ``incognito`` too:
# they answer as usual and record no use of what they served.
INCOGNITO_READ_HELP = (
    "Record nothing: the answer is the same, but no use of what it served is recorded "
    "(last_used_at, use_count, the session's cached resolution). Send it on every read "
    "of an incognito session: the server does not remember which sessions are."
)

# --------------------------------------------------------------------------- fields

SURROGATE = re.compile(r"[\ud800-\udfff]")


class TextField(serializers.CharField):
    """CharField that also refuses lone surrogates (PostgreSQL cannot encode them).

    DRF's CharField already refuses NUL characters.
    """

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        # DRF's own surrogate validator walks the string in Python (about 8 ms for
        # 60,000 characters, on every tool output posted); the regex below is the same
        # check in C.
        self.validators = [
            v for v in self.validators if not isinstance(v, ProhibitSurrogateCharactersValidator)
        ]

    def to_internal_value(self, data):
        value = super().to_internal_value(data)
        if SURROGATE.search(value):
            raise serializers.ValidationError("Must not contain lone surrogate characters.")
        return value


class StrictSerializer(serializers.Serializer):
    """Unknown keys are an error, not silently ignored (a typo should not lose data)."""

    def to_internal_value(self, data):
        if isinstance(data, dict):
            # "incognito" is answered before any view runs (agents/guard.py); false is
            # allowed on every write body.
            unknown = sorted(set(data) - set(self.fields) - {"incognito"})
            if unknown:
                raise serializers.ValidationError(
                    {name: ["Unknown field."] for name in unknown}, code="unknown_field"
                )
        return super().to_internal_value(data)


@extend_schema_field(
    {
        "type": "array",
        "items": {"type": "number"},
        "minItems": EMBEDDING_DIMENSIONS,
        "maxItems": EMBEDDING_DIMENSIONS,
        "nullable": True,
    }
)
class EmbeddingField(serializers.Field):
    """A client vector. Only its shape is checked here; the service validates it in
    full (memory.core.embeddings.validate_vector, a 400 naming ``embedding``), once.

    (A ListField of FloatFields would run 384 field validations per item.)
    """

    def __init__(self, **kwargs):
        kwargs.setdefault("required", False)
        kwargs.setdefault("allow_null", True)
        kwargs.setdefault(
            "help_text",
            f"Optional: your own {EMBEDDING_DIMENSIONS}-dimensional vector for the text, from "
            "the same model as the server's (see embedding_model in answers). Without it the "
            "server embeds the text before answering.",
        )
        super().__init__(**kwargs)

    def to_internal_value(self, data):
        if not isinstance(data, list) or len(data) != EMBEDDING_DIMENSIONS:
            raise serializers.ValidationError(f"Must be a list of {EMBEDDING_DIMENSIONS} numbers.")
        return data

    def to_representation(self, value):
        return list(value)


@extend_schema_field(
    {
        "type": "object",
        "additionalProperties": {},
        # Its bound in bytes as JSON, read by agents.body_caps (the body cap).
        "x-max-bytes": settings.CAIRN_METADATA_MAX_BYTES,
    }
)
class MetadataField(serializers.DictField):
    pass


def metadata_field(**kwargs):
    """The optional ``metadata`` field every write that takes one declares alike."""
    return MetadataField(
        required=False,
        help_text='Free JSON object (at most 8 KB), e.g. {"source_url": "..."}.',
        **kwargs,
    )


# --------------------------------------------------------------------------- errors
#
# Every error answer has one shape, ``{"error": {"code", "message", "fields"}}``
# (cairn.errors). The published schema documents it under one component name per
# API area, each with its own wording per status: ErrorArea keeps those names
# and texts so the schema stays as published.


@dataclass(frozen=True)
class ErrorArea:
    serializer: serializers.Serializer
    descriptions: dict[int, str]


def error_serializer(name: str, body_name: str, field_messages: serializers.Field):
    """The error envelope documented as components ``name`` and ``body_name``."""
    return inline_serializer(
        name,
        {
            "error": inline_serializer(
                body_name,
                {
                    "code": serializers.CharField(),
                    "message": serializers.CharField(),
                    "fields": serializers.DictField(child=field_messages),
                },
            )
        },
    )


# knowledge, recall, conversations, tool calls
KNOWLEDGE_ERRORS = ErrorArea(
    error_serializer(
        "KnowledgeError",
        "KnowledgeErrorBody",
        serializers.ListField(child=serializers.CharField()),
    ),
    {
        400: "Invalid input; `error.fields` names each field at fault.",
        401: "Missing or invalid bearer token.",
        403: "Not allowed for this token (e.g. a privileged category or a protected item).",
        404: "No such item in this workspace (items of other workspaces look the same).",
        409: "Conflicts with the stored state (see the message).",
        422: "Refused by a rule, e.g. `credential_refused`: the text looks like a secret.",
    },
)

# outcomes, evidence, context, lessons
LEARNING_ERRORS = ErrorArea(
    error_serializer("ErrorResponse", "ErrorBody", serializers.ListField()),
    {
        400: "Bad input; `fields` names each field at fault.",
        401: "Missing or invalid token.",
        403: "This token's scope may not do that (the message names the scope that may).",
        404: "No such item in this workspace.",
        422: "Refused by a rule; the message says which and why.",
    },
)

# skills, deltas, facts, tools, feedback
SKILL_ERRORS = ErrorArea(
    error_serializer("SkillsError", "SkillsErrorBody", serializers.ListField()),
    {
        400: "Invalid input: `fields` names each field at fault.",
        401: "Missing, invalid or revoked token.",
        403: "Not allowed for this token's scope (e.g. only a harness token sends samples).",
        404: "No such skill (or fact) in this token's workspace.",
        409: "Conflict: a registered version is immutable.",
        422: "A rule refused the request; `code` says which.",
    },
)

# exports, erasures, jobs (admin tokens)
ADMIN_ERRORS = ErrorArea(
    error_serializer("AdminError", "AdminErrorBody", serializers.ListField()),
    {
        400: "Invalid input: `fields` names each field at fault.",
        401: "Missing, invalid or revoked token.",
        403: "An agent-scoped token: this endpoint needs an admin-scoped one.",
        404: "No such job in this token's workspace.",
        422: "A rule refused the request; `code` says which.",
    },
)


def errors(*codes: int, area: ErrorArea, refusals: str = "") -> dict:
    """Documented error answers for ``codes``; ``refusals`` describes this endpoint's 422."""
    texts = dict(area.descriptions)
    if refusals:
        texts[422] = refusals
    return {code: OpenApiResponse(area.serializer, description=texts[code]) for code in codes}


_reused = threading.local()


def _instance(serializer_class):
    """This thread's instance of ``serializer_class``, made once and reused."""
    instances = _reused.__dict__
    serializer = instances.get(serializer_class)
    if serializer is None:
        serializer = instances[serializer_class] = serializer_class()
    return serializer


def validated(serializer_class, data) -> dict:
    """``serializer_class(data=data).is_valid(raise_exception=True)``'s validated data
    (the same errors: ``is_valid`` calls ``run_validation``).

    One instance per thread is reused: DRF deep-copies a serializer's declared fields
    for every new instance, which was a third of validating an outcome (its steps
    and checks are nested serializers) on every request.
    """
    return _instance(serializer_class).run_validation(data)


def validated_list(serializer_class, items: list, name: str) -> list[dict]:
    """Validate list elements one by one so errors read ``calls[2].ok``, not ``calls.2.ok``.

    One serializer (this thread's, see ``validated``) validates every element: a new
    instance per item cost about 1 ms each.
    """
    element = _instance(serializer_class)
    rows, problems = [], []
    for raw in items:
        try:
            rows.append(element.run_validation(raw))
            problems.append({})
        except serializers.ValidationError as exc:
            rows.append(None)
            problems.append(exc.detail)
    if any(problems):
        raise serializers.ValidationError({name: problems})
    return rows


# --------------------------------------------------------------------------- the request


def request_workspace(request):
    """The workspace of the request's token: every query of a view is scoped to it."""
    return request.auth.workspace


def actor(request) -> Actor:
    """The token's agent and its channel of trust (agent or harness scope), as the
    services take the writer (``agent:<name>`` / ``harness:<name>`` in the audit log)."""
    return Actor.for_token(request.auth)


# --------------------------------------------------------------------------- pagination


def page_body(page, results) -> dict:
    """A list response: the page's counts and offsets around ``results``."""
    return {
        "count": page.count,
        "limit": page.limit,
        "offset": page.offset,
        "next_offset": page.next_offset,
        "results": results,
    }


def paginated_serializer(name: str, item) -> serializers.Serializer:
    """The schema of ``page_body`` for items of ``item`` (a serializer class or field)."""
    return inline_serializer(
        name,
        {
            "count": serializers.IntegerField(),
            "limit": serializers.IntegerField(),
            "offset": serializers.IntegerField(),
            "next_offset": serializers.IntegerField(allow_null=True),
            "results": item(many=True) if isinstance(item, type) else item,
        },
    )


class PageParams(serializers.Serializer):
    limit = serializers.IntegerField(
        required=False,
        min_value=1,
        max_value=settings.CAIRN_LIST_PAGE_SIZE_MAX,
        help_text=f"Page size (default {settings.CAIRN_LIST_PAGE_SIZE}, "
        f"at most {settings.CAIRN_LIST_PAGE_SIZE_MAX}).",
    )
    offset = serializers.IntegerField(required=False, min_value=0, max_value=OFFSET_MAX, default=0)


# --------------------------------------------------------------------------- projects and refs


class ProjectFields(serializers.Serializer):
    project_remote = serializers.CharField(
        required=False, allow_blank=True, max_length=2000, trim_whitespace=True
    )
    project_path = serializers.CharField(required=False, allow_blank=True, max_length=4096)


def project_args(request, data: dict) -> dict:
    """``project_remote`` / ``project_path`` from the body, else from the query string."""
    remote = data.get("project_remote") or request.query_params.get("project_remote") or ""
    path_ = data.get("project_path") or request.query_params.get("project_path") or ""
    return {"remote": remote[:2000], "path": path_[:4096]}


class RefSerializer(serializers.Serializer):
    type = serializers.ChoiceField(choices=IN_PLAY_TYPES)
    id = serializers.IntegerField(min_value=1, max_value=BIGINT_MAX)


# --------------------------------------------------------------------------- selectors and jobs


class SelectorSerializer(serializers.Serializer):
    """One selector per request. Values are matched exactly, except ``text``. Each is
    bounded (the longest value its column holds, with room), so the body caps of
    export and erasure are derived from the schema (agents/body_caps.py)."""

    agent = serializers.CharField(
        required=False, max_length=200, help_text="agent name, e.g. gaia/chat"
    )
    project_remote = serializers.CharField(
        required=False, max_length=2000, help_text="git remote URL"
    )
    project_path = serializers.CharField(required=False, max_length=2000, help_text="checkout path")
    entity = serializers.CharField(
        required=False, max_length=200, help_text="e.g. person:sarah_chen"
    )
    context = serializers.CharField(required=False, max_length=200)
    session = serializers.CharField(required=False, max_length=200, help_text="session id")
    text = serializers.CharField(
        required=False,
        max_length=10_000,
        trim_whitespace=False,
        help_text="case-insensitive substring of any text (erasure only)",
    )
    skill = serializers.CharField(
        required=False, max_length=200, help_text="skill name (export only)"
    )


def selection_from_request(request, serializer_class, allowed) -> tuple[dict, Selector]:
    """Validate the admin request body with ``serializer_class`` and parse its ``selector``
    against the ``allowed`` keys: the validated data and the parsed selector."""
    data = serializer_class(data=request.data)
    data.is_valid(raise_exception=True)
    raw = data.validated_data["selector"]
    # The serializer drops keys it does not know; the parse must see them to refuse
    # them (a misspelt key would otherwise select the whole workspace).
    given = request.data.get("selector") if isinstance(request.data, dict) else None
    if isinstance(given, dict) and isinstance(raw, dict):
        raw = {**{k: v for k, v in given.items() if k not in raw}, **raw}
    selector = selector_parse(workspace=request.auth.workspace, data=raw, allowed=allowed)
    return data.validated_data, selector


def selection_for_job(request, serializer_class, allowed) -> tuple[dict, dict]:
    """``selection_from_request`` for a request that starts a job (an export, an
    erasure): the validated data, and the arguments each such service takes alike,
    the token's workspace, the parsed selector and the token's actor."""
    data, selector = selection_from_request(request, serializer_class, allowed)
    return data, {
        "workspace": request_workspace(request),
        "selector": selector,
        "actor": actor(request),
    }


class JobAcceptedSerializer(serializers.Serializer):
    job_id = serializers.IntegerField()
    status_url = serializers.CharField()


def accepted_response(run) -> Response:
    """202 with the job's id and where to poll it."""
    body = {"job_id": run.pk, "status_url": reverse("agents:job", args=[run.pk])}
    return Response(JobAcceptedSerializer(body).data, status=status.HTTP_202_ACCEPTED)
