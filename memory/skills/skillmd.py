"""SKILL.md, parsed (pure, no database): front matter, sections and their
slugs, declared local capabilities, and how a delta reads as one line."""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass, field

import yaml
from django.conf import settings

from memory.core.text import normalise_whitespace, sha256_text
from memory.core.validation import bad_request, check_json_strings

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


def section_spans(body: str) -> list[dict]:
    """``[{slug, title, start, end}]``: each section's line range in ``body.split("\n")``.

    Slugs come from the heading text (duplicates get -2, -3...); a section runs
    from its heading to the next heading of the same or a higher level. Headings
    inside fenced code blocks are not headings. No headings: one ``body`` span.
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
        return [{"slug": WHOLE_BODY_SLUG, "title": "", "start": 0, "end": len(lines)}]
    spans: list[dict] = []
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
        spans.append({"slug": slug, "title": title, "start": start, "end": end})
    return spans


def body_sections(body: str) -> list[dict]:
    """Split a Markdown body by ATX headings into ``[{slug, title, digest}]``.

    Deterministic: digests come from the whitespace-normalised section text
    (heading to the next heading of the same or a higher level), so whitespace
    edits keep both slug and digest. A body with no headings is one whole-body
    section, slug ``body``.
    """
    lines = body.split("\n")
    return [
        {
            "slug": span["slug"],
            "title": span["title"],
            "digest": sha256_text(
                normalise_whitespace("\n".join(lines[span["start"] : span["end"]]))
            ),
        }
        for span in section_spans(body)
    ]


def section_text(body: str, slug: str) -> dict | None:
    """One section's text and where it starts: ``{text, first_line}`` (1-based), or None."""
    lines = body.split("\n")
    for span in section_spans(body):
        if span["slug"] == slug:
            text = "\n".join(lines[span["start"] : span["end"]]).rstrip("\n")
            return {"text": text, "first_line": span["start"] + 1}
    return None


def _split_front_matter(text: str) -> tuple[str, str]:
    lines = text.split("\n")
    if not lines or lines[0].strip() != "---":
        raise bad_request(
            "skill_md", "SKILL.md must start with YAML front matter between '---' lines."
        )
    for index in range(1, len(lines)):
        if lines[index].strip() in {"---", "..."}:
            return "\n".join(lines[1:index]), "\n".join(lines[index + 1 :])
    raise bad_request("skill_md", "The YAML front matter is not closed by a '---' line.")


def _string_list(front: dict, key: str, max_chars: int) -> list[str]:
    value = front.get(key)
    if value is None or value == "":
        return []
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise bad_request(key, f"'{key}' must be a list of strings.")
    items = [v.strip() for v in value if v.strip()]
    if len(items) > LIST_MAX_ITEMS:
        raise bad_request(key, f"'{key}' has more than {LIST_MAX_ITEMS} entries.")
    for item in items:
        if len(item) > max_chars:
            raise bad_request(key, f"'{key}' entries must be at most {max_chars} characters.")
    return items


def skill_md_parse(*, skill_md: str) -> ParsedSkill:
    """Parse and validate a SKILL.md (400 naming the field on any problem)."""
    if not isinstance(skill_md, str) or not skill_md.strip():
        raise bad_request("skill_md", "This field may not be blank.")
    check_json_strings("skill_md", skill_md)
    if len(skill_md) > settings.CAIRN_SKILL_MD_MAX_CHARS:
        raise bad_request(
            "skill_md", f"SKILL.md must be at most {settings.CAIRN_SKILL_MD_MAX_CHARS} characters."
        )
    text = skill_md.lstrip("\ufeff").replace("\r\n", "\n").replace("\r", "\n")
    front_text, body = _split_front_matter(text)
    if len(front_text) > FRONT_MATTER_MAX_CHARS:
        raise bad_request(
            "skill_md", f"The front matter must be at most {FRONT_MATTER_MAX_CHARS} characters."
        )
    try:
        # BaseLoader keeps every scalar a string: `version: 1.10` stays "1.10".
        front = yaml.load(front_text, Loader=yaml.BaseLoader)  # noqa: S506 - BaseLoader is safe
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" (front matter line {mark.line + 1})" if mark else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise bad_request(
            "skill_md", f"The front matter is not valid YAML{where}: {problem}."
        ) from None
    if not isinstance(front, dict):
        raise bad_request("skill_md", "The front matter must be a YAML mapping of fields.")

    name = front.get("name")
    if not isinstance(name, str) or not name.strip():
        raise bad_request("name", "The front matter needs a 'name'.")
    name = name.strip()
    if not SKILL_NAME_RE.match(name):
        raise bad_request(
            "name",
            "'name' must be 1-64 lowercase letters, digits, '-', '_' or '.', "
            "starting and ending with a letter or digit.",
        )
    description = front.get("description") or ""
    if not isinstance(description, str):
        raise bad_request("description", "'description' must be a string.")
    if len(description) > DESCRIPTION_MAX_CHARS:
        raise bad_request(
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
        raise bad_request(
            "version", "'version' must be 1-64 characters: letters, digits, '.', '_', '+', '-'."
        )
    version = version.strip()

    sections = body_sections(body)
    if len(sections) > SECTIONS_MAX:
        raise bad_request("skill_md", f"SKILL.md may have at most {SECTIONS_MAX} headings.")
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
