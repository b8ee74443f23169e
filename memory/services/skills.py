"""Authored skills: SKILL.md parsing, registration, the tool registry, effective skills.

Also home of the two content checks every learned write goes through:
``credential_refuse`` (backed by the shared detector in secrets_scan) and
``injection_scan``.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from dataclasses import dataclass, field

import yaml
from django.conf import settings
from django.core.cache import cache
from django.db import transaction
from django.db.models import F
from django.utils import timezone

from cairn.errors import ApplicationError, NotFoundError
from memory.models import (
    Agent,
    AgentTool,
    DeltaStatus,
    OrphanNotice,
    Skill,
    SkillDelta,
    SkillVersion,
    Workspace,
)
from memory.services.audit import audit_record
from memory.services.secrets_scan import CREDENTIAL_REFUSED, find_secret

WHOLE_BODY_SLUG = "body"
SKILL_NAME_RE = re.compile(r"^[a-z0-9](?:[a-z0-9._-]{0,62}[a-z0-9])?$")
VERSION_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._+-]{0,63}$")
NAMESPACE_RE = re.compile(r"^[a-z0-9][a-z0-9_.-]{0,63}$")
FRONT_MATTER_MAX_CHARS = 8000
DESCRIPTION_MAX_CHARS = 1024
LIST_MAX_ITEMS = 100
PERMISSION_MAX_CHARS = 200
TOOL_NAME_MAX_CHARS = 128
SECTIONS_MAX = 200
REGISTRY_MAX_TOOLS = 200


def sha256_text(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def normalise_whitespace(text: str) -> str:
    return " ".join(text.split())


def bad_input(field_name: str, message: str) -> ApplicationError:
    """Shape errors found inside a service answer 400 like a serializer would."""
    return ApplicationError(
        f"Invalid input: {field_name}. {message}",
        code="invalid",
        fields={field_name: [message]},
        status_code=400,
    )


# --------------------------------------------------------------------------- content checks


def storable_refuse(*, value, field_name: str) -> None:
    """400 if a string in ``value`` cannot be stored: NUL characters (which Postgres
    text and jsonb reject) or lone surrogates (which are not UTF-8)."""
    for text in _strings(value):
        if "\x00" in text:
            raise bad_input(field_name, "Text may not contain NUL characters.")
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            raise bad_input(
                field_name, "Text must be valid Unicode (no lone surrogates)."
            ) from None


def _looks_like_credential(text: str) -> str | None:
    """The kind of credential ``text`` seems to contain, or None (the shared detector)."""
    finding = find_secret(text)
    return finding.kind if finding else None


def credential_refuse(*, value, field_name: str) -> None:
    """Refuse (422) if any string in ``value`` (keys included) looks like a credential."""
    for text in _strings(value):
        kind = _looks_like_credential(text)
        if kind:
            raise ApplicationError(
                f"{field_name} contains what looks like a credential ({kind}). Learned "
                "content must never hold secrets: remove it and store the secret in your "
                "secret manager instead.",
                code=CREDENTIAL_REFUSED,
                fields={field_name: [f"looks like a {kind}"]},
            )


def _strings(value):
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for key, inner in value.items():
            yield str(key)
            yield from _strings(inner)
    elif isinstance(value, list | tuple):
        for inner in value:
            yield from _strings(inner)


_INJECTION_RULES: tuple[tuple[str, re.Pattern], ...] = (
    (
        "ignore_instructions",
        re.compile(
            r"\b(?:ignore|disregard|forget|override|bypass)\b[^.\n]{0,40}?"
            r"\b(?:previous|prior|above|earlier|all|any|system|your|the)\b[^.\n]{0,20}?"
            r"\b(?:instructions?|rules?|prompts?|guidelines?|polic(?:y|ies)|guardrails?)\b",
            re.I,
        ),
    ),
    (
        "run_commands",
        re.compile(
            r"\b(?:run|execute|exec|eval|invoke)\b[^.\n]{0,30}?"
            r"\b(?:commands?|shell|scripts?|bash|powershell|terminal|cmd)\b"
            r"|\bsudo\s|\brm\s+-[a-z]*r|\b(?:curl|wget)\s+\S+\s*\|\s*(?:ba|z)?sh\b|\$\([^)]*\)",
            re.I,
        ),
    ),
    (
        "exfiltrate",
        re.compile(
            r"\b(?:send|post|upload|forward|exfiltrate|transmit|leak|copy)\b[^.\n]{0,40}?"
            r"\b(?:data|contents?|files?|credentials?|secrets?|tokens?|passwords?|keys?"
            r"|history|conversations?|memory|memories|everything|inbox)\b[^.\n]{0,40}?"
            r"\b(?:to|into|at)\b"
            r"|https?://[^\s?#]+\?[^\s#]*=",
            re.I,
        ),
    ),
    (
        "change_permissions",
        re.compile(
            r"\b(?:grant|give|enable|elevate|escalate|raise|widen|add|allow|disable|turn\s+off)\b"
            r"[^.\n]{0,30}?\b(?:permissions?|privileges?|admin|root|sudo|security\s+tier"
            r"|confirmations?|approval)\b",
            re.I,
        ),
    ),
    ("hidden_zero_width", re.compile("[\u200b\u200c\u200d\u2060\ufeff\u00ad]")),
    ("hidden_bidi_override", re.compile("[\u202a-\u202e\u2066-\u2069]")),
    ("hidden_html_comment", re.compile(r"<!--")),
)
_BASE64_BLOB = re.compile(r"[A-Za-z0-9+/_-]{40,}={0,2}")


def injection_scan(text: str) -> list[dict]:
    """Findings ``[{"rule", "excerpt"}]`` for prompt-injection shapes in ``text``.

    A heuristic, not a proof: findings quarantine nothing by themselves (the
    provenance decides that) but they stop auto-approval and are shown to reviewers.
    """
    findings: list[dict] = []
    for rule, pattern in _INJECTION_RULES:
        match = pattern.search(text)
        if match:
            findings.append({"rule": rule, "excerpt": _excerpt(text, match.start(), match.end())})
    for match in _BASE64_BLOB.finditer(text):
        if _looks_encoded(match.group(0)):
            findings.append(
                {
                    "rule": "hidden_base64_blob",
                    "excerpt": _excerpt(text, match.start(), match.end()),
                }
            )
            break
    return findings


def _looks_encoded(blob: str) -> bool:
    # Encoded data mixes cases and digits; long paths and identifiers rarely do.
    return (
        any(c.isupper() for c in blob)
        and any(c.islower() for c in blob)
        and any(c.isdigit() for c in blob)
    )


def injection_spans(text: str) -> list[tuple[int, int, str]]:
    """Every span of ``text`` the injection scan's rules match: [(start, end, rule)].

    ``injection_scan`` records one excerpt per rule; reviewers need each match
    marked in place, so this walks the same rules with ``finditer``.
    """
    spans = [
        (match.start(), match.end(), rule)
        for rule, pattern in _INJECTION_RULES
        for match in pattern.finditer(text)
        if match.end() > match.start()
    ]
    spans += [
        (match.start(), match.end(), "hidden_base64_blob")
        for match in _BASE64_BLOB.finditer(text)
        if _looks_encoded(match.group(0))
    ]
    return sorted(spans)


def _excerpt(text: str, start: int, end: int) -> str:
    snippet = text[max(0, start - 20) : min(len(text), end + 20)]
    # Show hidden characters as escapes so the reviewer can see them.
    return snippet.encode("unicode_escape").decode("ascii")[:160]


# --------------------------------------------------------------------------- SKILL.md parsing


@dataclass(frozen=True)
class ParsedSkill:
    name: str
    version: str
    description: str
    permissions: list[str]
    tools: list[str]
    skill_md: str
    body: str
    digest: str
    body_digest: str
    sections: list[dict]
    warnings: list[str] = field(default_factory=list)


def local_capabilities(permissions: list[str]) -> list[str]:
    """The permissions whose domain is a local capability (no deltas allowed on those)."""
    domains = set(settings.CAIRN_SKILL_LOCAL_CAPABILITIES)
    return [p for p in permissions if p.split(":", 1)[0].strip().lower() in domains]


def heading_slug(title: str) -> str:
    ascii_title = unicodedata.normalize("NFKD", title).encode("ascii", "ignore").decode()
    slug = re.sub(r"[^a-z0-9]+", "-", ascii_title.lower()).strip("-")
    return slug or "section"


_HEADING = re.compile(r"^ {0,3}(#{1,6})[ \t]+(.*?)(?:[ \t]+#+)?[ \t]*$")
_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")


def body_sections(body: str) -> list[dict]:
    """Split a Markdown body by ATX headings into ``[{slug, title, digest}]``.

    Deterministic: slugs come from the heading text (duplicates get -2, -3...),
    digests from the whitespace-normalised section text (heading to the next
    heading of the same or a higher level), so whitespace edits keep both.
    Headings inside fenced code blocks are not headings. A body with no
    headings is one whole-body section, slug ``body``.
    """
    lines = body.split("\n")
    headings: list[tuple[int, int, str]] = []  # (line index, level, title)
    fence: str | None = None
    for index, line in enumerate(lines):
        fence_match = _FENCE.match(line)
        if fence_match:
            marker = fence_match.group(1)
            if fence is None:
                fence = marker
            elif marker[0] == fence[0] and len(marker) >= len(fence):
                fence = None
            continue
        if fence is not None:
            continue
        match = _HEADING.match(line)
        if match and match.group(2).strip():
            headings.append((index, len(match.group(1)), match.group(2).strip()))
    if not headings:
        return [
            {
                "slug": WHOLE_BODY_SLUG,
                "title": "",
                "digest": sha256_text(normalise_whitespace(body)),
            }
        ]
    sections: list[dict] = []
    used: set[str] = set()
    for position, (start, level, title) in enumerate(headings):
        end = len(lines)
        for later_start, later_level, _ in headings[position + 1 :]:
            if later_level <= level:
                end = later_start
                break
        slug = base = heading_slug(title)
        counter = 2
        while slug in used:
            slug = f"{base}-{counter}"
            counter += 1
        used.add(slug)
        text = "\n".join(lines[start:end])
        sections.append(
            {"slug": slug, "title": title, "digest": sha256_text(normalise_whitespace(text))}
        )
    return sections


def _split_front_matter(text: str) -> tuple[str, str]:
    lines = text.split("\n")
    if not lines or lines[0].strip() != "---":
        raise bad_input(
            "skill_md", "SKILL.md must start with YAML front matter between '---' lines."
        )
    for index in range(1, len(lines)):
        if lines[index].strip() in {"---", "..."}:
            return "\n".join(lines[1:index]), "\n".join(lines[index + 1 :])
    raise bad_input("skill_md", "The YAML front matter is not closed by a '---' line.")


def _string_list(front: dict, key: str, max_chars: int) -> list[str]:
    value = front.get(key)
    if value is None or value == "":
        return []
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise bad_input(key, f"'{key}' must be a list of strings.")
    items = [v.strip() for v in value if v.strip()]
    if len(items) > LIST_MAX_ITEMS:
        raise bad_input(key, f"'{key}' has more than {LIST_MAX_ITEMS} entries.")
    for item in items:
        if len(item) > max_chars:
            raise bad_input(key, f"'{key}' entries must be at most {max_chars} characters.")
    return items


def skill_md_parse(*, skill_md: str) -> ParsedSkill:
    """Parse and validate a SKILL.md (400 naming the field on any problem)."""
    if not isinstance(skill_md, str) or not skill_md.strip():
        raise bad_input("skill_md", "This field may not be blank.")
    storable_refuse(value=skill_md, field_name="skill_md")
    if len(skill_md) > settings.CAIRN_SKILL_MD_MAX_CHARS:
        raise bad_input(
            "skill_md", f"SKILL.md must be at most {settings.CAIRN_SKILL_MD_MAX_CHARS} characters."
        )
    text = skill_md.lstrip("\ufeff").replace("\r\n", "\n").replace("\r", "\n")
    front_text, body = _split_front_matter(text)
    if len(front_text) > FRONT_MATTER_MAX_CHARS:
        raise bad_input(
            "skill_md", f"The front matter must be at most {FRONT_MATTER_MAX_CHARS} characters."
        )
    try:
        # BaseLoader keeps every scalar a string: `version: 1.10` stays "1.10".
        front = yaml.load(front_text, Loader=yaml.BaseLoader)  # noqa: S506 - BaseLoader is safe
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" (front matter line {mark.line + 1})" if mark else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise bad_input(
            "skill_md", f"The front matter is not valid YAML{where}: {problem}."
        ) from None
    if not isinstance(front, dict):
        raise bad_input("skill_md", "The front matter must be a YAML mapping of fields.")

    name = front.get("name")
    if not isinstance(name, str) or not name.strip():
        raise bad_input("name", "The front matter needs a 'name'.")
    name = name.strip()
    if not SKILL_NAME_RE.match(name):
        raise bad_input(
            "name",
            "'name' must be 1-64 lowercase letters, digits, '-', '_' or '.', "
            "starting and ending with a letter or digit.",
        )
    description = front.get("description") or ""
    if not isinstance(description, str):
        raise bad_input("description", "'description' must be a string.")
    if len(description) > DESCRIPTION_MAX_CHARS:
        raise bad_input(
            "description", f"'description' must be at most {DESCRIPTION_MAX_CHARS} characters."
        )
    permissions = _string_list(front, "permissions", PERMISSION_MAX_CHARS)
    tools = _string_list(front, "tools", TOOL_NAME_MAX_CHARS)

    digest = sha256_text(text)
    version = front.get("version")
    if version is None or version == "":
        # Versions are optional in the SKILL.md format; a content-addressed one keeps
        # "versions are immutable" true for bare skills too.
        version = f"sha-{digest[:12]}"
    if not isinstance(version, str) or not VERSION_RE.match(version.strip()):
        raise bad_input(
            "version", "'version' must be 1-64 characters: letters, digits, '.', '_', '+', '-'."
        )
    version = version.strip()

    sections = body_sections(body)
    if len(sections) > SECTIONS_MAX:
        raise bad_input("skill_md", f"SKILL.md may have at most {SECTIONS_MAX} headings.")
    warnings = []
    if sections[0]["slug"] == WHOLE_BODY_SLUG and sections[0]["title"] == "":
        warnings.append(
            "The body has no Markdown headings, so every delta anchors to the whole body "
            "(section 'body'): any edit of the body will orphan them. Add '## ' headings "
            "to make learned adjustments survive unrelated edits."
        )
    return ParsedSkill(
        name=name,
        version=version,
        description=description,
        permissions=permissions,
        tools=tools,
        skill_md=text,
        body=body,
        digest=digest,
        body_digest=sha256_text(normalise_whitespace(body)),
        sections=sections,
        warnings=warnings,
    )


# --------------------------------------------------------------------------- registration


@dataclass(frozen=True)
class SkillRegistration:
    skill: Skill
    version: SkillVersion
    created: bool
    warnings: list[str]
    orphaned: int = 0


LIVE_STATUSES = (DeltaStatus.STAGED, DeltaStatus.ACTIVE, DeltaStatus.QUARANTINED)


@transaction.atomic
def skill_register(*, workspace: Workspace, skill_md: str, actor: str) -> SkillRegistration:
    """Register a SKILL.md version.

    1. Parse and validate (400 naming the field).
    2. An existing (name, version): identical content is an idempotent no-op,
       different content is refused (409): versions are immutable.
    3. The new version becomes current. If its whitespace-normalised body
       differs from the previous current one (or it now declares a local
       capability), every live delta on the skill is orphaned, audited and
       counted in an OrphanNotice. Otherwise live deltas follow the new
       version silently (same text), unless their section slug vanished.
    """
    parsed = skill_md_parse(skill_md=skill_md)
    skill, _ = Skill.objects.select_for_update().get_or_create(
        workspace=workspace, name=parsed.name
    )
    existing = SkillVersion.objects.filter(skill=skill, version=parsed.version).first()
    if existing is not None:
        if existing.digest != parsed.digest:
            raise ApplicationError(
                f"Skill {parsed.name!r} version {parsed.version!r} is already registered with "
                "different content. Versions are immutable: bump 'version' to register a change.",
                code="version_immutable",
                fields={"version": ["already registered with different content"]},
                status_code=409,
            )
        return SkillRegistration(
            skill=skill, version=existing, created=False, warnings=parsed.warnings
        )

    previous = skill.current_version
    version = SkillVersion.objects.create(
        skill=skill,
        version=parsed.version,
        description=parsed.description,
        permissions=parsed.permissions,
        tools=parsed.tools,
        skill_md=parsed.skill_md,
        body=parsed.body,
        digest=parsed.digest,
        body_digest=parsed.body_digest,
        sections=parsed.sections,
        registered_by=actor,
    )
    skill.current_version = version
    skill.save(update_fields=["current_version"])

    orphaned = 0
    if previous is not None:
        live = list(
            SkillDelta.objects.select_for_update()
            .filter(skill=skill, status__in=LIVE_STATUSES)
            .order_by("id")
        )
        changed = previous.body_digest != version.body_digest
        newly_local = bool(local_capabilities(version.permissions))
        reason = (
            f"base skill {skill.name} changed from {previous.version} to {version.version}"
            if changed
            else f"base skill {skill.name} {version.version} declares a local capability"
        )
        to_orphan: list[SkillDelta] = []
        for delta in live:
            if changed or newly_local or version.section(delta.anchor_section) is None:
                to_orphan.append(delta)
            else:
                delta.anchor_version = version
                delta.save(update_fields=["anchor_version", "updated_at"])
        for delta in to_orphan:
            previous_status = delta.status
            delta.status = DeltaStatus.ORPHANED
            delta.save(update_fields=["status", "updated_at"])
            audit_record(
                workspace=workspace,
                actor="system:orphan",
                action="delta.orphan",
                target_type="skill_delta",
                target_id=delta.pk,
                reason=reason if changed or newly_local else "anchored section vanished",
                details={"from": previous_status, "version": version.version},
            )
        orphaned = len(to_orphan)
        if orphaned:
            OrphanNotice.objects.create(
                workspace=workspace, skill=skill, version=version, count=orphaned
            )

    audit_record(
        workspace=workspace,
        actor=actor,
        action="skill.register",
        target_type="skill_version",
        target_id=version.pk,
        details={
            "skill": skill.name,
            "version": version.version,
            "previous": previous.version if previous else None,
            "orphaned": orphaned,
        },
    )
    return SkillRegistration(
        skill=skill, version=version, created=True, warnings=parsed.warnings, orphaned=orphaned
    )


# --------------------------------------------------------------------------- tool registry


@transaction.atomic
def agent_tools_set(*, agent: Agent, tools: list[dict]) -> list[AgentTool]:
    """Replace ``agent``'s declared tool registry with ``tools``."""
    if len(tools) > REGISTRY_MAX_TOOLS:
        raise bad_input("tools", f"At most {REGISTRY_MAX_TOOLS} tools.")
    storable_refuse(value=tools, field_name="tools")
    seen: set[str] = set()
    rows = []
    for index, tool in enumerate(tools):
        name = tool["name"].strip()
        if not name or len(name) > TOOL_NAME_MAX_CHARS:
            raise bad_input(f"tools[{index}].name", "Tool names are 1-128 characters.")
        if name in seen:
            raise bad_input(f"tools[{index}].name", f"Tool {name!r} is declared twice.")
        seen.add(name)
        namespaces = sorted({ns.strip() for ns in tool.get("reads_facts") or []})
        for ns in namespaces:
            if not NAMESPACE_RE.match(ns):
                raise bad_input(
                    f"tools[{index}].reads_facts",
                    "Fact namespaces are 1-64 lowercase letters, digits, '_', '.', '-'.",
                )
        rows.append(
            AgentTool(
                workspace=agent.workspace,
                agent=agent,
                name=name,
                mutating=bool(tool.get("mutating", False)),
                needs_confirmation=bool(tool.get("needs_confirmation", False)),
                reads_facts=namespaces,
            )
        )
    AgentTool.objects.filter(agent=agent).delete()
    AgentTool.objects.bulk_create(rows)
    audit_record(
        workspace=agent.workspace,
        actor=f"agent:{agent.name}",
        action="agent.tools.set",
        target_type="agent",
        target_id=agent.pk,
        details={"count": len(rows)},
    )
    return sorted(rows, key=lambda t: t.name)


# --------------------------------------------------------------------------- effective skill


def _cache_key(*, agent: Agent, skill: Skill, session_id: str) -> str:
    session = hashlib.sha256(session_id.encode()).hexdigest()[:32]
    return f"skills:effective:v1:{agent.workspace_id}:{agent.pk}:{skill.pk}:{session}"


def effective_skill_cache_forget(*, workspace_id: int, agent_ids: list[int] | None = None) -> int:
    """Delete cached effective skills (of ``agent_ids``, else of the whole workspace).

    Erasure calls this: a cached rendering quotes delta payloads. Returns how many
    keys went. Keys are found with SCAN on the cache's own Redis, never KEYS.
    """
    if agent_ids is not None and not agent_ids:
        return 0
    patterns = (
        [f"skills:effective:v1:{workspace_id}:{agent_id}:*" for agent_id in agent_ids]
        if agent_ids is not None
        else [f"skills:effective:v1:{workspace_id}:*"]
    )
    client = cache._cache.get_client(write=True)
    deleted = 0
    for pattern in patterns:
        batch = []
        for key in client.scan_iter(match=cache.make_key(pattern), count=500):
            batch.append(key)
            if len(batch) >= 500:
                deleted += client.delete(*batch)
                batch = []
        if batch:
            deleted += client.delete(*batch)
    return deleted


def delta_usage_record(*, delta_ids: list[int]) -> None:
    """Rendering a delta counts as use (never as evidence): budget ranking reads this."""
    if delta_ids:
        SkillDelta.objects.filter(pk__in=delta_ids).update(
            use_count=F("use_count") + 1, last_used_at=timezone.now()
        )


def effective_skill_resolve(
    *,
    agent: Agent,
    skill_name: str,
    session_id: str = "",
    learned: bool = True,
    goal: str = "",
) -> dict:
    """The effective skill for ``agent``: base ⊕ its active deltas.

    1. ``learned=False`` short-circuits before any delta is read: the base alone.
    2. With a ``session_id``, the first resolution is cached for the session
       (Django cache, i.e. Redis) and returned unchanged afterwards, so a delta
       approved mid-session applies from the next session.
    3. Deltas rendered by a fresh resolution have their use recorded.
    """
    from memory.selectors.skills import effective_skill_build, skill_get

    storable_refuse(value=[session_id, goal], field_name="session_id")
    skill = skill_get(workspace=agent.workspace, name=skill_name)
    if skill.current_version is None:
        raise NotFoundError(f"Skill {skill_name!r} has no registered version.")
    if not learned:
        return {**effective_skill_build(agent=agent, skill=skill, learned=False), "cached": False}
    key = _cache_key(agent=agent, skill=skill, session_id=session_id) if session_id else None
    if key:
        hit = cache.get(key)
        if hit is not None:
            return {**hit, "cached": True}
    built = effective_skill_build(agent=agent, skill=skill, learned=True, goal=goal)
    delta_usage_record(delta_ids=[entry["id"] for entry in built["applied"]])
    if key:
        cache.set(key, built, timeout=settings.CAIRN_SKILL_SESSION_CACHE_S)
    return {**built, "cached": False}


# --------------------------------------------------------------------------- rendering helpers


def delta_line(*, kind: str, payload: dict) -> str:
    """One delta as one rendered line. Whitespace is collapsed so learned text can
    never open a heading, a list or a code block of its own inside the skill."""
    if kind == "preference":
        return f"- {normalise_whitespace(payload['body'])}"
    if kind == "example":
        return (
            f"- Example: {normalise_whitespace(payload['input'])} → "
            f"{normalise_whitespace(payload['output'])}"
        )
    return ""


def estimate_tokens(text: str) -> int:
    return -(-len(text) // 4)
