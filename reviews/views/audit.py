"""The audit log: who changed what, when and why (never the content itself)."""

from __future__ import annotations

from datetime import date, datetime, timedelta

from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_GET

from memory.core.selectors import audit_event_actions, audit_event_list
from memory.identity.selectors import project_labels
from memory.skills.selectors import delta_skill_names
from reviews.access import require_role
from reviews.audit_sentences import Lookups, audit_readable
from reviews.htmx import render_page
from reviews.pagination import paginate

FILTERS = {"action": 64, "actor": 200, "target_type": 64, "target_id": 64}


def _day(value: str) -> date | None:
    """A ``YYYY-MM-DD`` filter value, or None (a bad date is ignored, like an empty one)."""
    try:
        return date.fromisoformat(value.strip()[:10]) if value.strip() else None
    except ValueError:
        return None


def _start_of(day: date | None) -> datetime | None:
    """Midnight at the start of ``day`` in the server's time zone."""
    if day is None:
        return None
    return timezone.make_aware(datetime.combine(day, datetime.min.time()))


def _readable(workspace, page):
    """Each event gets ``.readable`` (a sentence and its leftover details). The names it
    needs cost one query each, and only when the page has such targets."""
    events = list(page)
    lookups = Lookups(
        delta_skills=delta_skill_names(
            workspace=workspace,
            ids=[
                int(e.target_id)
                for e in events
                if e.target_type == "skill_delta" and e.target_id.isdigit()
            ],
        ),
        project_labels=project_labels(
            workspace=workspace, digests=[e.target_id for e in events if e.target_type == "project"]
        ),
    )
    for event in events:
        event.readable = audit_readable(event, lookups)
    return page


@require_role
@require_GET
def audit(request):
    filters = {name: request.GET.get(name, "").strip()[:cap] for name, cap in FILTERS.items()}
    dates = {name: _day(request.GET.get(name, "")) for name in ("from", "to")}
    since = _start_of(dates["from"])
    until = _start_of(dates["to"] + timedelta(days=1)) if dates["to"] else None
    queryset = audit_event_list(workspace=request.workspace, **filters, since=since, until=until)
    workspace = request.workspace
    context = {
        **filters,
        "date_from": dates["from"].isoformat() if dates["from"] else "",
        "date_to": dates["to"].isoformat() if dates["to"] else "",
        "timezone": timezone.get_current_timezone_name(),
        "page": _readable(workspace, paginate(request, queryset, ordering=("-created_at", "-id"))),
        "filtered": any(filters.values()) or any(dates.values()),
        # A callable: the template calls it only when it renders the filters (full page).
        "actions": lambda: audit_event_actions(workspace=workspace),
        "list_url": reverse("reviews:audit"),
    }
    return render_page(request, "reviews/audit.html", context, partial="rows")
