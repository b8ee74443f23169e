"""The role every UI view and API operation needs: one table, default deny.

Every route of the review UI is named here with the least role it needs, and every
route of the agent API with the token scopes that may call it. Nothing else decides:

- ``reviews.access.RoleMiddleware`` looks the request's URL name up in ``UI_ROLES``
  before the view runs; a name that is not in the table is refused (403), so a new
  page nobody declared is closed, not open.
- ``agents.auth.ScopeFromTable`` (the API's one permission class) does the same with
  ``API_SCOPES``.
- The Members page and ``--help`` texts come from ``role_lines()`` and
  ``scope_lines()``, built from the same table, so what the page says is what the
  server does.

``tests/test_roles_table.py`` enumerates every URL (the resolver) and every API
operation (the schema) against every role and token scope, and fails when a route is
missing from the table or answers differently from what it declares.

Keys are URL names without their namespace (``reviews:`` for the UI, ``agents:`` for
the API), so this module imports neither interface.
"""

from __future__ import annotations

from memory.models import Role, TokenScope
from memory.models.identity import ROLE_RANK

#: No login: the login page, health checks, the API schema and the docs site.
PUBLIC = "public"
#: Any signed-in person, member of a workspace or not (the landing redirect, the
#: workspace switcher, which checks the membership it switches to).
SIGNED_IN = "signed_in"

VIEWER = Role.VIEWER.value
REVIEWER = Role.REVIEWER.value
ADMIN = Role.ADMIN.value

#: Routes outside both namespaces (``cairn/urls.py``): who may open them.
SITE_ROUTES: dict[str, str] = {
    "healthz": PUBLIC,
    "healthz-slash": PUBLIC,
    "schema": PUBLIC,
    "docs": PUBLIC,
    "docs-site": PUBLIC,
    "login": PUBLIC,
    "logout": PUBLIC,
}

#: Review UI: URL name -> the least role in the current workspace.
UI_ROLES: dict[str, str] = {
    "home": SIGNED_IN,
    "switch_workspace": SIGNED_IN,
    "dashboard": VIEWER,
    "counts": VIEWER,
    "search": VIEWER,
    "members": ADMIN,
    "members_add": ADMIN,
    "members_role": ADMIN,
    "members_remove": ADMIN,
    "workspace_settings": ADMIN,
    "workspace_settings_save": ADMIN,
    "workspace_new": ADMIN,
    "agents": ADMIN,
    "agents_create": ADMIN,
    "agents_token_issue": ADMIN,
    "agents_token_revoke": ADMIN,
    "jobs": VIEWER,
    "jobs_detail": VIEWER,
    "jobs_toast": VIEWER,
    "jobs_run": ADMIN,
    "audit": VIEWER,
    "lessons": VIEWER,
    "lessons_detail": VIEWER,
    "lessons_retire": REVIEWER,
    "lessons_confirm": REVIEWER,
    "lessons_restore": REVIEWER,
    "lessons_pin": REVIEWER,
    "lessons_unpin": REVIEWER,
    "lessons_seal": REVIEWER,
    "lessons_unseal": REVIEWER,
    "lessons_edit": REVIEWER,
    "projects_label": REVIEWER,
    "conversations": VIEWER,
    "outcomes": VIEWER,
    "outcomes_detail": VIEWER,
    "situations": VIEWER,
    "situations_remove": REVIEWER,
    "knowledge": VIEWER,
    "knowledge_detail": VIEWER,
    "knowledge_edit": REVIEWER,
    "knowledge_archive": REVIEWER,
    "knowledge_confirm": REVIEWER,
    "knowledge_restore": REVIEWER,
    "knowledge_delete": REVIEWER,
    "contradictions": VIEWER,
    "contradictions_resolve": REVIEWER,
    "deltas_detail": VIEWER,
    "staged": VIEWER,
    "staged_approve_bulk": REVIEWER,
    "staged_decided": VIEWER,
    "staged_approve": REVIEWER,
    "staged_reject": REVIEWER,
    "quarantine": VIEWER,
    "quarantine_decided": VIEWER,
    "quarantine_confirm": REVIEWER,
    "quarantine_reject": REVIEWER,
    "orphans": VIEWER,
    "orphans_decided": VIEWER,
    "orphans_reapprove": REVIEWER,
    "orphans_reapprove_one": REVIEWER,
    "orphans_discard": REVIEWER,
    "orphans_notice_seen": REVIEWER,
    "skills": VIEWER,
    "skills_detail": VIEWER,
    "skills_revert": REVIEWER,
    "skills_reset": REVIEWER,
    "skills_facts": VIEWER,
    # SPEC section 2: export is an admin's (a whole workspace leaves the server).
    "exports": ADMIN,
    "exports_start": ADMIN,
    "exports_import": ADMIN,
    "exports_detail": ADMIN,
    "exports_download": ADMIN,
    "erasures": ADMIN,
    "erasures_preview": ADMIN,
    "erasures_start": ADMIN,
    "erasures_detail": ADMIN,
    "erasures_receipt": ADMIN,
    "webhooks": ADMIN,
    "webhooks_create": ADMIN,
    "webhooks_detail": ADMIN,
    "webhooks_update": ADMIN,
    "webhooks_rotate": ADMIN,
    "webhooks_delete": ADMIN,
    "webhooks_test": ADMIN,
    "webhooks_delivery_toast": ADMIN,
    "webhooks_redeliver": ADMIN,
}

#: Background polls (htmx ``every``): refused quietly with 204 "no change" rather than
#: a login page or a 403 page swapped into the page a person is typing on.
UI_POLLS: frozenset[str] = frozenset({"counts", "jobs_toast", "webhooks_delivery_toast"})

ANY_TOKEN: frozenset[str] = frozenset(TokenScope.values)
ADMIN_TOKEN: frozenset[str] = frozenset({TokenScope.ADMIN.value})
HARNESS_TOKEN: frozenset[str] = frozenset({TokenScope.HARNESS.value})

#: Agent API: URL name -> the token scopes that may call it (every method). What a
#: scope may then do inside an allowed endpoint (which channel its word is recorded
#: as) is the trust kernel's business, not this table's.
API_SCOPES: dict[str, frozenset[str]] = {
    "whoami": ANY_TOKEN,
    "knowledge": ANY_TOKEN,
    "knowledge-batch": ANY_TOKEN,
    "knowledge-detail": ANY_TOKEN,
    "recall": ANY_TOKEN,
    "session-turns": ANY_TOKEN,
    "conversations-search": ANY_TOKEN,
    "tool-calls": ANY_TOKEN,
    "tool-calls-stats": ANY_TOKEN,
    "outcome-create": ANY_TOKEN,
    "evidence-create": ANY_TOKEN,
    "context": ANY_TOKEN,
    "action-check": ANY_TOKEN,
    # A person's answer to an ask comes through the process that talks to them.
    "action-answer": HARNESS_TOKEN,
    "lessons": ANY_TOKEN,
    "lesson-check": ANY_TOKEN,
    "lesson-detail": ANY_TOKEN,
    "lesson-retire": ANY_TOKEN,
    "lesson-history": ANY_TOKEN,
    "situations": ANY_TOKEN,
    "situations-classify": ANY_TOKEN,
    "situations-known": ANY_TOKEN,
    "turn-results": ANY_TOKEN,
    "skill-register": ANY_TOKEN,
    "skill-detail": ANY_TOKEN,
    "skill-deltas": ANY_TOKEN,
    "skill-effective": ANY_TOKEN,
    "agent-tools": ANY_TOKEN,
    "feedback": ANY_TOKEN,
    "fact-list": ANY_TOKEN,
    "fact-detail": ANY_TOKEN,
    "exports": ADMIN_TOKEN,
    "export_download": ADMIN_TOKEN,
    "erasures": ADMIN_TOKEN,
    "erasures_preview": ADMIN_TOKEN,
    "jobs": ADMIN_TOKEN,
    "job": ADMIN_TOKEN,
}


def ui_role(url_name: str | None) -> str | None:
    """The least role a review-UI route needs; None when undeclared (then: refuse)."""
    return UI_ROLES.get(url_name or "")


def api_scopes(url_name: str | None) -> frozenset[str]:
    """The token scopes an API route admits; empty when undeclared (then: refuse)."""
    return API_SCOPES.get(url_name or "", frozenset())


def role_allows(*, held: str, needed: str) -> bool:
    """Whether a member holding ``held`` may open a route needing ``needed``."""
    if needed in (PUBLIC, SIGNED_IN):
        return True
    if held not in ROLE_RANK or needed not in ROLE_RANK:
        return False
    return ROLE_RANK[Role(held)] >= ROLE_RANK[Role(needed)]


#: What a section of the UI is, in a person's words; a section is a URL name's part
#: before its first underscore. The roles test fails when a section has no words.
SECTION_WORDS: dict[str, str] = {
    "home": "the start page",
    "switch": "switching workspace",
    "dashboard": "the dashboard",
    "counts": "the queue counts",
    "search": "search",
    "members": "members and their roles",
    "workspace": "workspace settings",
    "agents": "agents and their tokens",
    "jobs": "jobs",
    "audit": "the audit log",
    "lessons": "lessons",
    "projects": "project labels",
    "conversations": "conversations",
    "outcomes": "outcomes",
    "situations": "known situations",
    "knowledge": "knowledge items",
    "contradictions": "contradictions",
    "deltas": "skill changes",
    "staged": "staged skill changes",
    "quarantine": "quarantined skill changes",
    "orphans": "orphaned skill changes",
    "skills": "skills and learned facts",
    "exports": "exports and imports",
    "erasures": "erasures",
    "webhooks": "webhooks",
}

_ROLE_VERBS = {
    VIEWER: ("Viewer", "sees"),
    REVIEWER: ("Reviewer", "everything a viewer can, and decides on"),
    ADMIN: ("Admin", "everything a reviewer can, and manages"),
}


def section_of(url_name: str) -> str:
    return url_name.split("_", 1)[0]


def _join(words: list[str]) -> str:
    if len(words) <= 1:
        return "".join(words)
    return ", ".join(words[:-1]) + " and " + words[-1]


def role_lines() -> list[tuple[str, str]]:
    """One sentence per role, built from ``UI_ROLES``: ``[(role, sentence), ...]``,
    viewer first. A section is listed under the least role any of its routes needs
    beyond what the role below already had."""
    lines = []
    for role, (label, verb) in _ROLE_VERBS.items():
        sections: list[str] = []
        for name, needed in UI_ROLES.items():
            section = section_of(name)
            if needed == role and name not in UI_POLLS and section not in sections:
                sections.append(section)
        words = [SECTION_WORDS[s] for s in sections]
        lines.append((role, f"{label}: {verb} {_join(words)}."))
    return lines


_SCOPE_LABELS = {
    TokenScope.AGENT.value: "Agent token (the model's tools)",
    TokenScope.HARNESS.value: "Harness token (the process that runs the tools)",
    TokenScope.ADMIN.value: "Admin token",
}


def scope_lines() -> list[tuple[str, str]]:
    """One sentence per token scope, built from ``API_SCOPES``, for ``--help`` texts."""
    everyone = sorted(name for name, scopes in API_SCOPES.items() if scopes == ANY_TOKEN)
    lines = []
    for scope, label in _SCOPE_LABELS.items():
        own = sorted(
            name for name, scopes in API_SCOPES.items() if scope in scopes and scopes != ANY_TOKEN
        )
        text = f"{label}: the {len(everyone)} agent endpoints"
        if own:
            text += f", and {_join(own)}"
        lines.append((scope, text + "."))
    return lines
