"""The conversation viewer: one session's turns, tool calls inline, cited turns marked.

Provenance turns on delta cards (``sess_91f3#12``) and outcome pages link here
with ``?session=<id>&cite=<turn index>``; the cited turns are highlighted and the
page opens at the first of them.
"""

from __future__ import annotations

from django.urls import reverse
from django.views.decorators.http import require_GET

from memory.knowledge.selectors import conversation_session_get
from reviews.access import require_role
from reviews.htmx import render_page

SESSION_MAX_CHARS = 200
CITES_MAX = 50


@require_role
@require_GET
def conversations(request):
    session = request.GET.get("session", "").strip()[:SESSION_MAX_CHARS]
    cited = sorted(
        {int(v) for v in request.GET.getlist("cite")[:CITES_MAX] if v.isdigit() and len(v) < 10}
    )
    view = {"entries": [], "turns": 0, "truncated": False}
    if session:
        view = conversation_session_get(workspace=request.workspace, session_id=session)
    for entry in view["entries"]:
        entry["cited"] = entry["kind"] == "turn" and entry["item"].turn_index in cited
    context = {
        "session": session,
        "cited": cited,
        "view": view,
        "list_url": reverse("reviews:conversations"),
    }
    return render_page(request, "reviews/conversation.html", context, partial="turns")
