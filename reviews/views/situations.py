"""Situations in the review UI: a turn's blockers on its outcome page (with the cost
line), and the "Known blockers" a machine remembers, which a reviewer can remove."""

from __future__ import annotations

from django.contrib import messages
from django.http import Http404
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_GET, require_POST

from cairn.errors import ApplicationError
from memory.models import Outcome
from memory.situations.lessons import situation_lesson_remove
from memory.situations.selectors import (
    LESSON_REVIEW_ORDER,
    lesson_get,
    lesson_machines,
    lessons_for_review,
    turn_cost_line,
    turn_events,
    turns_for_outcome,
)
from reviews.access import actor_for, require_role
from reviews.forms import ReasonForm
from reviews.htmx import redirect_back, render_action, render_page, wants_fragment
from reviews.pagination import paginate

TEMPLATE = "reviews/situations.html"
STATES = [("live", "live"), ("all", "all, with ended ones")]


def outcome_situations(outcome: Outcome) -> list[dict]:
    """The recovery state posted under this outcome's id: events and the cost line."""
    return [
        {"turn": turn, "cost": turn_cost_line(turn), "events": list(turn_events(turn))}
        for turn in turns_for_outcome(agent=outcome.agent, outcome_id=outcome.outcome_id)
    ]


@require_role
@require_GET
def situations(request):
    machine = request.GET.get("machine", "").strip()[:128]
    state = request.GET.get("state", "live")
    if state not in dict(STATES):
        state = "live"
    queryset = lessons_for_review(
        workspace=request.workspace, now=timezone.now(), machine=machine, live=state == "live"
    )
    page = paginate(request, queryset, ordering=LESSON_REVIEW_ORDER)
    context = {
        "page": page,
        "machine": machine,
        "state": state,
        "states": STATES,
        "machines": lambda: lesson_machines(workspace=request.workspace),
        "now": timezone.now(),
        "list_url": reverse("reviews:situations"),
    }
    return render_page(request, TEMPLATE, context, partial="rows")


@require_role
@require_POST
def situations_remove(request, pk: int):
    lesson = lesson_get(workspace=request.workspace, pk=pk)
    if lesson is None:
        raise Http404("No such known blocker in this workspace.")
    form = ReasonForm(request.POST)
    error = ""
    if not form.is_valid():
        error = form.first_error()
    else:
        try:
            lesson = situation_lesson_remove(
                actor=actor_for(request),
                workspace=request.workspace,
                lesson_id=lesson.pk,
                now=timezone.now(),
                reason=form.cleaned_data["reason"],
            )
            messages.success(
                request, f"Removed: {lesson.subject} is no longer a known blocker here."
            )
        except ApplicationError as exc:
            error = exc.message
    if not wants_fragment(request):
        if error:
            messages.error(request, error)
        return redirect_back("reviews:situations")
    context = {"lesson": lesson, "now": timezone.now(), "error": error}
    return render_action(request, f"{TEMPLATE}#blocker", context, status=422 if error else 200)
