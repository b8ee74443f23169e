"""Lessons: browse, read one with its evidence and history, and act on it.

Every action is a POST by a reviewer that calls one service in
``memory.lessons.lifecycle`` (a confirmation: ``evidence_confirm_by_person``) with
the person as actor and their reason; the answer (for htmx) is the lesson's main block re-rendered, so its badges,
actions, history and activity change in place.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import date, timedelta

from django.conf import settings
from django.contrib import messages
from django.http import Http404
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_GET, require_POST

from cairn.errors import ApplicationError
from memory.core.trust import channel_weighs
from memory.identity.selectors import project_labels
from memory.lessons.changes import CHANGES
from memory.lessons.lifecycle import (
    lesson_edit,
    lesson_pin,
    lesson_restore,
    lesson_retire,
    lesson_seal,
)
from memory.lessons.posted_evidence import evidence_confirm_by_person
from memory.lessons.selectors import (
    LESSON_ORDERS,
    lesson_browse,
    lesson_get,
    lesson_history,
    lesson_lineage_activity,
    lesson_projects,
)
from memory.models import Lesson, LessonScope, LessonState
from reviews.access import actor_for, require_role
from reviews.forms import LessonEditForm, ReasonForm, form_errors_from
from reviews.htmx import redirect_back, render_action, render_page, wants_fragment
from reviews.ledger_words import describe_changes, provenance
from reviews.pagination import paginate

LIST = "reviews/lessons.html"
DETAIL = "reviews/lesson_detail.html"
EVIDENCE_SHOWN = 50
OUTCOME_CHIPS_SHOWN = 20
FILTERS = {
    "scope": 8,
    "project": 64,
    "state": 8,
    "op": 200,
    "q": 200,
    "sort": 8,
    "changed": 8,
    "since": 10,
}


def _since(value: str, changed: str) -> date | None:
    """The "changed since" day: the one asked for, else the dashboard's trend window."""
    if not changed:
        return None
    try:
        return date.fromisoformat(value)
    except ValueError:
        today = timezone.localdate()
        return today - timedelta(days=settings.CAIRN_UI_TREND_DAYS - 1)


def _filters(request) -> dict:
    f = {name: request.GET.get(name, "").strip()[:cap] for name, cap in FILTERS.items()}
    if f["changed"] not in CHANGES:
        f["changed"] = ""
    since = _since(f["since"], f["changed"])
    f["since"] = since.isoformat() if since else ""
    if f["scope"] not in LessonScope.values:
        f["scope"] = ""
    if f["state"] not in LessonState.values:
        f["state"] = ""
    if f["sort"] not in LESSON_ORDERS:
        f["sort"] = ""
    return f


@require_role
@require_GET
def lessons(request):
    f = _filters(request)
    workspace = request.workspace
    queryset = lesson_browse(
        workspace=workspace,
        scope=f["scope"],
        project_digest=f["project"],
        state=f["state"],
        operation_key=f["op"],
        q=f["q"],
        changed=f["changed"],
        since=date.fromisoformat(f["since"]) if f["since"] else None,
    )
    page = paginate(request, queryset, ordering=LESSON_ORDERS[f["sort"] or "new"])
    labels = project_labels(
        workspace=workspace,
        digests=[lesson.project_digest for lesson in page] + [f["project"]],
    )

    def projects():
        # A callable: only the full page (its filter form) pays for this query.
        digests = lesson_projects(workspace=workspace)
        names = project_labels(workspace=workspace, digests=digests)
        return [(d, names.get(d, "")) for d in digests]

    context = {
        **f,
        "page": page,
        "labels": labels,
        "filtered": any(v for k, v in f.items() if k != "sort"),
        "projects": projects,
        "states": LessonState.values,
        "changes": CHANGES,
        "orders": [
            ("new", "newest first"),
            ("strong", "most confident"),
            ("weak", "least confident"),
        ],
        "list_url": reverse("reviews:lessons"),
    }
    return render_page(request, LIST, context, partial="rows")


def _lesson_or_404(request, pk: int) -> Lesson:
    try:
        return lesson_get(workspace=request.workspace, lesson_id=pk)
    except ApplicationError:
        raise Http404("No such lesson in this workspace.") from None


def _outcome_pk(evidence_id: str) -> int | None:
    kind, _, value = (evidence_id or "").partition(":")
    return int(value) if kind == "outcome" and value.isdigit() else None


def _detail_context(request, lesson: Lesson, **extra) -> dict:
    history = lesson_history(lesson=lesson)
    versions = history["versions"]
    for version in versions:
        outcomes = version["outcomes"]
        version["chips"] = outcomes[::-1][:OUTCOME_CHIPS_SHOWN]  # newest first, bounded
        version["more"] = max(0, len(outcomes) - OUTCOME_CHIPS_SHOWN)
        for change in version["changes"]:
            change["outcome_pk"] = _outcome_pk(change["evidence_id"])
    describe_changes([change for version in versions for change in version["changes"]])
    rows = [v["lesson"] for v in versions]
    evidence = list(lesson.evidence.select_related("outcome"))
    head = next((row for row in rows if row.pk == history["id"]), lesson)
    earned = any(
        channel_weighs(change["channel"]) and change["after"] > change["before"]
        for version in versions
        for change in version["changes"]
    ) or any(ev.relation == "supports" and channel_weighs(ev.outcome.channel) for ev in evidence)
    return {
        "lesson": lesson,
        "head": head,
        "weight": "earned" if earned else "claimed",
        "provenance": provenance(lesson),
        "versions": versions,
        # Newest first and bounded: a global lesson can gather thousands of outcomes.
        "evidence": evidence[::-1][:EVIDENCE_SHOWN],
        "evidence_total": len(evidence),
        "labels": project_labels(
            workspace=request.workspace, digests=[row.project_digest for row in rows]
        ),
        "activity": lesson_lineage_activity(
            workspace=request.workspace, lesson_ids=[row.pk for row in rows]
        ),
        "errors": {},
        **extra,
    }


@require_role
@require_GET
def lessons_detail(request, pk: int):
    lesson = _lesson_or_404(request, pk)
    return render_page(request, DETAIL, _detail_context(request, lesson), partial="lesson_main")


def _answer(request, lesson: Lesson, *, status: int = 200, **extra):
    """The action's answer: the lesson's main block (htmx) or a redirect to its page."""
    if not wants_fragment(request):
        return redirect_back("reviews:lessons_detail", lesson.pk)
    context = _detail_context(request, _lesson_or_404(request, lesson.pk), **extra)
    response = render_action(request, f"{DETAIL}#lesson_main", context, status=status)
    if status == 200 and lesson.pk != extra.get("shown_pk", lesson.pk):
        response["HX-Push-Url"] = reverse("reviews:lessons_detail", args=[lesson.pk])
    return response


def _act(request, pk: int, name: str, do: Callable[[Lesson, str, str], tuple[Lesson, str]]):
    """Shared body of the confirm-with-reason actions: check the reason, call the service,
    answer with the lesson block (422 with the error in place when refused)."""
    lesson = _lesson_or_404(request, pk)
    form = ReasonForm(request.POST)
    errors = {}
    if not form.is_valid():
        errors[name] = form.first_error()  # shown in the action's own form
    else:
        try:
            changed, message = do(lesson, form.cleaned_data["reason"], actor_for(request))
        except ApplicationError as exc:
            errors["action"] = exc.message  # a rule said no: shown on the lesson
    if errors:
        if wants_fragment(request):
            return _answer(request, lesson, status=422, errors=errors)
        messages.error(request, next(iter(errors.values())))
        return redirect_back("reviews:lessons_detail", lesson.pk)
    messages.success(request, message)
    return _answer(request, changed)


@require_role
@require_POST
def lessons_retire(request, pk: int):
    def do(lesson, reason, actor):
        if lesson.state == LessonState.RETIRED:
            return lesson, f"Lesson {lesson.pk} was already retired."
        lesson = lesson_retire(lesson=lesson, actor=actor, reason=reason)
        return lesson, (
            f"Lesson {lesson.pk} retired. Agents no longer get it, and it is not re-learned "
            "from the same evidence."
        )

    return _act(request, pk, "retire", do)


@require_role
@require_POST
def lessons_restore(request, pk: int):
    def do(lesson, reason, actor):
        if lesson.state != LessonState.RETIRED:
            return lesson, f"Lesson {lesson.pk} is not retired."
        lesson = lesson_restore(lesson=lesson, actor=actor, reason=reason)
        return lesson, f"Lesson {lesson.pk} restored ({lesson.state})."

    return _act(request, pk, "restore", do)


@require_role
@require_POST
def lessons_confirm(request, pk: int):
    """A person's confirmation: ``user_confirmed`` evidence with the reviewer as actor."""

    def do(lesson, reason, actor):
        result = evidence_confirm_by_person(
            workspace=request.workspace,
            target_type="lesson",
            target_id=lesson.pk,
            actor=actor,
            reason=reason,
        )
        activated = " It is active now." if result.activated else ""
        return result.target, (
            f"Lesson {lesson.pk} confirmed by you: confidence {result.before:.2f} → "
            f"{result.after:.2f}.{activated}"
        )

    return _act(request, pk, "confirm", do)


def _flag_view(*, flag: str, value: bool, service, done: str):
    @require_role
    @require_POST
    def view(request, pk: int):
        def do(lesson, reason, actor):
            lesson = service(lesson=lesson, actor=actor, reason=reason, **{flag: value})
            return lesson, f"Lesson {lesson.pk} {done}."

        return _act(request, pk, flag, do)

    return view


lessons_pin = _flag_view(
    flag="pinned", value=True, service=lesson_pin, done="pinned: it no longer decays"
)
lessons_unpin = _flag_view(flag="pinned", value=False, service=lesson_pin, done="unpinned")
lessons_seal = _flag_view(
    flag="sealed",
    value=True,
    service=lesson_seal,
    done="sealed: agents can no longer edit or retire it",
)
lessons_unseal = _flag_view(flag="sealed", value=False, service=lesson_seal, done="unsealed")


@require_role
@require_POST
def lessons_edit(request, pk: int):
    """A new version through ``lesson_edit``; the page then shows (and the URL names) it."""
    lesson = _lesson_or_404(request, pk)
    form = LessonEditForm(request.POST)
    edited = None
    if form.is_valid():
        try:
            edited = lesson_edit(
                lesson=lesson,
                text=form.cleaned_data["text"],
                operation_key=form.cleaned_data["operation_key"],
                actor=actor_for(request),
                reason=form.cleaned_data["reason"],
            )
        except ApplicationError as exc:
            form_errors_from(form, exc)
    if edited is None:
        if wants_fragment(request):
            return _answer(request, lesson, status=422, edit_form=form)
        messages.error(request, form.first_error())
        return redirect_back("reviews:lessons_detail", lesson.pk)
    if edited.pk == lesson.pk:
        messages.info(request, "Nothing changed: the text and operation are the same.")
    else:
        messages.success(
            request, f"Saved as lesson {edited.pk}; lesson {lesson.pk} is kept in its history."
        )
    return _answer(request, edited, shown_pk=lesson.pk)
