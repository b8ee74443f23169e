"""The three delta review queues (SPEC sections 6 and 8).

- Staged: each delta as a diff of its agent's effective skill without and with
  it; approve (refused below the trust-ledger bar) or reject, with a reason.
- Quarantine: untrusted deltas with the injection-scan findings marked in the
  payload; each one confirmed explicitly (a checkbox and a reason) or rejected.
  There is no bulk action here, by design.
- Orphans: deltas a skill update detached, grouped by skill and version, with a
  one-time notice per update; re-approve one, several or discard.

Every action is a POST by a reviewer or admin, goes through one memory service
(which checks the role again and writes the audit record) and, with htmx,
answers with the card removed or re-rendered plus the nav counters and a toast.
"""

from __future__ import annotations

from django.conf import settings
from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.http import Http404
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST

from cairn.errors import ApplicationError
from memory.models import DeltaKind, DeltaStatus
from memory.skills.consent import (
    delta_approve,
    delta_confirm_quarantined,
    delta_reapprove,
    delta_reject,
    orphan_notice_mark_seen,
)
from memory.skills.decisions import decision_seen_of
from memory.skills.effective import delta_previews
from memory.skills.selectors import (
    DELTA_QUEUE_ORDER,
    ORPHAN_ORDER,
    delta_queue_facets,
    delta_review_get,
    delta_review_list,
    orphan_notice_get,
    orphan_notice_list,
    skill_version_bodies,
)
from memory.skills.skillmd import section_text
from memory.skills.trust import delta_said_beside
from reviews.access import actor_for, call_service, require_role
from reviews.diffs import (
    change_digest,
    diff_counts,
    diff_digest,
    sectioned_render,
    side_by_side,
    unified_diff,
)
from reviews.forms import ConfirmUntrustedForm, ReasonForm
from reviews.htmx import redirect_back, render_action, render_page, wants_fragment
from reviews.pagination import paginate

STAGED = "reviews/staged.html"
QUARANTINE = "reviews/quarantine.html"
ORPHANS = "reviews/orphans.html"
REMOVED = "reviews/_removed.html"
NOTICES_SHOWN = 10


# --------------------------------------------------------------------------- reading


def _is_stale(delta) -> bool:
    rebase = delta.preview["rebase"] or {}
    return delta.status == DeltaStatus.ORPHANED and bool(delta.stale or rebase.get("stale"))


def _section_change(delta, old_body: str | None) -> dict | None:
    """For a stale orphan: its section's text in the version it was written for → now."""
    old = section_text(old_body, delta.anchor_section) if old_body is not None else None
    new = section_text(delta.skill.current_version.body, delta.anchor_section)
    if old is None or new is None:
        return None
    return {
        "old_version": delta.anchor_version.version,
        "new_version": delta.skill.current_version.version,
        "diff": unified_diff(old["text"], new["text"], context=1000),
    }


def with_previews(workspace, deltas: list) -> list:
    """Attach to each delta its preview (see ``delta_previews``) and what the card shows.

    - ``anchored``: the anchored section of the current base, in full;
    - ``diff`` (each learned line inside its section, see ``sectioned_render``),
      ``diff_rows`` (the same, side by side) and ``diff_counts``;
    - ``seen_digest``: what the diff changes, posted back by the decision forms;
      ``seen``: the record a decision keeps of the whole diff (``memory.skills.decisions``);
    - ``section_change``: for stale orphans, the section's old → new text.
    """
    previews = delta_previews(workspace=workspace, deltas=list(deltas))
    said = delta_said_beside(deltas=deltas)
    for delta in deltas:
        delta.preview = previews[delta.pk]
        delta.said_beside = said.get(delta.pk, [])
    old_bodies = skill_version_bodies(
        workspace=workspace, ids=[d.anchor_version_id for d in deltas if _is_stale(d)]
    )
    for delta in deltas:
        body = delta.skill.current_version.body
        delta.diff = unified_diff(
            sectioned_render(delta.preview["without"], base_body=body),
            sectioned_render(delta.preview["with"], base_body=body),
        )
        delta.diff_rows = side_by_side(delta.diff)
        delta.diff_counts = diff_counts(delta.diff)
        delta.seen_digest = change_digest(delta.diff, version=delta.preview["with"]["version"])
        delta.seen = decision_seen_of(
            delta=delta, preview=delta.preview, digest=diff_digest(delta.diff)
        )
        delta.anchored = section_text(delta.skill.current_version.body, delta.anchor_section)
        delta.section_change = (
            _section_change(delta, old_bodies.get(delta.anchor_version_id))
            if _is_stale(delta)
            else None
        )
        delta.group_key = (delta.skill_id, delta.anchor_version_id)
        delta.is_stale = _is_stale(delta)
    return deltas


# ?sort= for the waiting queues: keyset orderings (each ends in the unique id).
SORTS = {
    "oldest": ("created_at", "id"),
    "newest": ("-created_at", "-id"),
    "skill": ("skill_id", "created_at", "id"),
    "agent": ("agent_id", "created_at", "id"),
}
SORT_LABELS = {
    "oldest": "waiting longest",
    "newest": "newest",
    "skill": "by skill",
    "agent": "by agent",
}


def _filters(request) -> dict:
    skill = request.GET.get("skill", "").strip()[:64]
    agent = request.GET.get("agent", "").strip()
    kind = request.GET.get("kind", "").strip()
    return {
        "skill": skill,
        "agent": int(agent) if agent.isdigit() and len(agent) < 10 else None,
        "kind": kind if kind in DeltaKind.values else "",
    }


def _queue_context(request, *, status: str, url_name: str, ordering) -> dict:
    filters = _filters(request)
    queryset = delta_review_list(
        workspace=request.workspace,
        status=status,
        skill_name=filters["skill"],
        agent_id=filters["agent"],
        kind=filters["kind"],
    )
    sort = request.GET.get("sort", "")
    if sort not in SORTS or ordering == ORPHAN_ORDER:
        sort = ""
    page = paginate(request, queryset, ordering=SORTS[sort] if sort else ordering)
    with_previews(request.workspace, page.items)
    filtered = bool(filters["skill"] or filters["agent"] is not None or filters["kind"])
    return {
        "page": page,
        "total": queryset.count(),
        "queue_status": status,
        "filter_skill": filters["skill"],
        "filter_agent": filters["agent"],
        "filter_kind": filters["kind"],
        "sort": sort or "oldest",
        "sorts": SORT_LABELS if ordering != ORPHAN_ORDER else {},
        "kinds": DeltaKind.values,
        "grouped": sort == "skill",
        "ticked": [],
        "filtered": filtered,
        "facets": lambda: delta_queue_facets(workspace=request.workspace, status=status),
        "list_url": reverse(f"reviews:{url_name}"),
        "api_hint": "POST /api/v1/skills/{name}/deltas/",
    }


def _card_context(request, pk: int) -> dict:
    delta = delta_review_get(workspace=request.workspace, pk=pk)
    if delta is None:
        raise Http404("No such delta in this workspace.")
    with_previews(request.workspace, [delta])
    return {"delta": delta}


@require_role
@require_GET
def staged(request):
    context = _queue_context(
        request, status=DeltaStatus.STAGED, url_name="staged", ordering=DELTA_QUEUE_ORDER
    )
    return render_page(request, STAGED, context, partial="rows")


@require_role
@require_GET
def quarantine(request):
    context = _queue_context(
        request, status=DeltaStatus.QUARANTINED, url_name="quarantine", ordering=DELTA_QUEUE_ORDER
    )
    return render_page(request, QUARANTINE, context, partial="rows")


def _orphans_context(request) -> dict:
    context = _queue_context(
        request, status=DeltaStatus.ORPHANED, url_name="orphans", ordering=ORPHAN_ORDER
    )
    notices = list(orphan_notice_list(workspace=request.workspace)[: NOTICES_SHOWN + 1])
    context["notices"] = notices[:NOTICES_SHOWN]
    context["more_notices"] = len(notices) > NOTICES_SHOWN
    context["ticked"] = []
    # Bulk re-approval skips stale orphans (each is re-approved on its own card): with
    # only stale ones on the page, "Select all" and the bulk form would select nothing.
    context["bulk_possible"] = any(not d.is_stale for d in context["page"].items)
    return context


@require_role
@require_GET
def orphans(request):
    return render_page(request, ORPHANS, _orphans_context(request), partial="rows")


# --------------------------------------------------------------------------- acting


def _act(
    request,
    pk: int,
    *,
    expected: str,
    action: str,
    service,
    template: str,
    done: str,
    list_url: str,
    form_class=ReasonForm,
):
    """One per-delta action: validate, call the service, answer for htmx or not.

    1. A delta of another workspace is a 404, like a missing one.
    2. A bad form re-renders the card with the error (422), or redirects with it.
    3. A delta no longer in this queue (someone else acted) leaves the queue
       with a note; nothing is changed.
    4. The diff is rebuilt now; if an approval names another change than the one
       the person was shown (a new skill version, or the same lines changed), the
       card comes back with the new diff and nothing is decided (422).
    5. A refusal by the service (e.g. not enough evidence) re-renders the card
       with its message (422); a role refusal is a 403.
    6. Success records the diff decided on, removes the card and updates the nav
       counters and toasts.
    """
    delta = delta_review_get(workspace=request.workspace, pk=pk)
    if delta is None:
        raise Http404("No such delta in this workspace.")

    # The delta's own page posts plain forms and wants to come back to itself.
    back = ("reviews:deltas_detail", pk) if request.POST.get("back") == "detail" else (list_url,)

    def refused(message: str):
        if wants_fragment(request):
            context = {**_card_context(request, pk), "errors": {action: message}}
            return render_action(request, f"{template}#card", context, status=422)
        messages.error(request, f"Delta #{pk}: {message}")
        return redirect_back(*back)

    def removed():
        if wants_fragment(request):
            return render_action(request, REMOVED, {})
        return redirect_back(*back)

    form = form_class(request.POST)
    if not form.is_valid():
        return refused(form.first_error())
    if delta.status != expected:
        messages.info(request, f"Delta #{pk} is already {delta.status}; nothing changed.")
        return removed()
    with_previews(request.workspace, [delta])
    posted = request.POST.get("seen", "")
    # Only a decision that makes the change live needs it to be the change shown.
    if posted and action not in ("reject", "discard") and posted != delta.seen_digest:
        return refused(
            "The skill or its learned lines changed since this card was shown; "
            "read the diff again, then decide."
        )
    _, error = call_service(
        lambda: service(
            delta=delta,
            actor=actor_for(request),
            reason=form.cleaned_data["reason"],
            seen=delta.seen,
        )
    )
    if error:
        return refused(error)
    messages.success(request, done.format(pk=pk, skill=delta.skill.name))
    return removed()


@require_role
@require_POST
def staged_approve(request, pk: int):
    return _act(
        request,
        pk,
        expected=DeltaStatus.STAGED,
        action="approve",
        service=delta_approve,
        template=STAGED,
        done="Delta #{pk} approved: {skill} uses it from the next session.",
        list_url="reviews:staged",
    )


@require_role
@require_POST
def staged_approve_bulk(request):
    """Approve the ticked staged deltas with one shared reason, each through ``delta_approve``.

    Only staged deltas of this workspace are looked up, so no quarantined (untrusted)
    delta can be approved through this form, whatever ids are posted; one the ledger
    bar still blocks is refused and stays, with the service's reason in the summary.
    """
    form = ReasonForm(request.POST)
    ids = _selected_ids(request)
    error = form.first_error() if not form.is_valid() else ""
    if not ids:
        error = "Tick at least one delta to approve."
    if error:
        if wants_fragment(request):
            context = {
                **_queue_context(
                    request,
                    status=DeltaStatus.STAGED,
                    url_name="staged",
                    ordering=DELTA_QUEUE_ORDER,
                ),
                "bulk_error": error,
                "ticked": ids,
            }
            return render_action(request, f"{STAGED}#rows", context, status=422)
        messages.error(request, error)
        return redirect_back("reviews:staged")
    found = list(
        delta_review_list(workspace=request.workspace, status=DeltaStatus.STAGED)
        .filter(pk__in=ids)
        .order_by("id")
    )
    actor = actor_for(request)
    approved, refused = [], []
    with_previews(request.workspace, found)
    for delta in found:
        try:
            delta_approve(
                delta=delta, actor=actor, reason=form.cleaned_data["reason"], seen=delta.seen
            )
        except ApplicationError as exc:
            if exc.status_code == 403:
                raise PermissionDenied(exc.message) from exc
            refused.append(f"#{delta.pk}: {exc.message}")
        else:
            approved.append(delta.pk)
    skipped = len(ids) - len(found)
    summary = f"Approved {len(approved)} of {len(ids)}"
    if refused:
        summary += f"; refused {'; '.join(refused)}"
    if skipped:
        summary += f"; {skipped} no longer staged"
    level = messages.SUCCESS if approved and not refused else messages.WARNING
    messages.add_message(request, level, summary + ".")
    if wants_fragment(request):
        context = _queue_context(
            request, status=DeltaStatus.STAGED, url_name="staged", ordering=DELTA_QUEUE_ORDER
        )
        return render_action(request, f"{STAGED}#rows", context)
    return redirect_back("reviews:staged")


@require_role
@require_POST
def staged_reject(request, pk: int):
    return _act(
        request,
        pk,
        expected=DeltaStatus.STAGED,
        action="reject",
        service=delta_reject,
        template=STAGED,
        done="Delta #{pk} rejected and archived.",
        list_url="reviews:staged",
    )


@require_role
@require_POST
def quarantine_confirm(request, pk: int):
    return _act(
        request,
        pk,
        expected=DeltaStatus.QUARANTINED,
        action="confirm",
        service=delta_confirm_quarantined,
        template=QUARANTINE,
        done="Delta #{pk} confirmed: {skill} uses it from the next session.",
        list_url="reviews:quarantine",
        form_class=ConfirmUntrustedForm,
    )


@require_role
@require_POST
def quarantine_reject(request, pk: int):
    return _act(
        request,
        pk,
        expected=DeltaStatus.QUARANTINED,
        action="reject",
        service=delta_reject,
        template=QUARANTINE,
        done="Delta #{pk} rejected and archived.",
        list_url="reviews:quarantine",
    )


@require_role
@require_POST
def orphans_discard(request, pk: int):
    return _act(
        request,
        pk,
        expected=DeltaStatus.ORPHANED,
        action="discard",
        service=delta_reject,
        template=ORPHANS,
        done="Delta #{pk} discarded (archived).",
        list_url="reviews:orphans",
    )


def _reapprove_one(*, delta, actor, reason: str, seen: dict):
    """Re-approve a single orphan; a refusal comes back as an error, like the other actions."""
    result = delta_reapprove(deltas=[delta], actor=actor, reason=reason, seen={delta.pk: seen})
    if result["refused"]:
        refusal = result["refused"][0]
        raise ApplicationError(refusal["message"], code=refusal["code"])
    return result


@require_role
@require_POST
def orphans_reapprove_one(request, pk: int):
    delta = delta_review_get(workspace=request.workspace, pk=pk)
    untrusted = delta is not None and delta.trust == "untrusted"
    done = (
        "Delta #{pk} is back in quarantine: untrusted deltas need a per-delta confirmation."
        if untrusted
        else "Delta #{pk} re-approved onto the current version of {skill}."
    )
    return _act(
        request,
        pk,
        expected=DeltaStatus.ORPHANED,
        action="reapprove",
        service=_reapprove_one,
        template=ORPHANS,
        done=done,
        list_url="reviews:orphans",
    )


def _selected_ids(request) -> list[int]:
    values = request.POST.getlist("ids")[: settings.CAIRN_UI_PAGE_SIZE_MAX]
    return sorted({int(v) for v in values if v.isdigit()})


def _report(request, *, ids: list[int], found: dict, result: dict) -> dict:
    """What a bulk re-approval did, per delta, for the report panel."""

    def now(status: str, pks: list[int]) -> list:
        rows = delta_review_list(workspace=request.workspace, status=status).filter(pk__in=pks)
        return sorted(rows, key=lambda d: d.pk) if pks else []

    reapproved = now(DeltaStatus.ACTIVE, result["reapproved"])
    quarantined = now(DeltaStatus.QUARANTINED, result["quarantined"])
    return {
        "reapproved": reapproved,
        "stale": [d for d in reapproved + quarantined if d.stale],
        "quarantined": quarantined,
        "refused": [{**r, "delta": found[r["id"]]} for r in result["refused"]],
        # Ticked, but no longer an orphan of this workspace (someone acted first).
        "skipped": [pk for pk in ids if pk not in found],
    }


@require_role
@require_POST
def orphans_reapprove(request):
    """Bulk re-approve: the ticked orphans, one ``delta_reapprove`` call, a report.

    Only orphans are looked up, so no other status (quarantined above all) can be
    approved through this form, whatever ids are posted.
    """
    form = ReasonForm(request.POST)
    ids = _selected_ids(request)
    error = form.first_error() if not form.is_valid() else ""
    if not ids:
        error = "Tick at least one orphan to re-approve."
    if error:
        if wants_fragment(request):
            context = {**_orphans_context(request), "bulk_error": error, "ticked": ids}
            return render_action(request, f"{ORPHANS}#rows", context, status=422)
        messages.error(request, error)
        return redirect_back("reviews:orphans")
    found = {
        d.pk: d
        for d in delta_review_list(workspace=request.workspace, status=DeltaStatus.ORPHANED)
        .filter(pk__in=ids)
        .order_by("id")
    }
    with_previews(request.workspace, list(found.values()))
    # A stale orphan's section was rewritten: one shared reason cannot say it was read
    # against the new text, so it is re-approved only on its own card.
    stale = [d for d in found.values() if d.is_stale]
    try:
        result = delta_reapprove(
            deltas=[d for d in found.values() if not d.is_stale],
            actor=actor_for(request),
            reason=form.cleaned_data["reason"],
            seen={pk: d.seen for pk, d in found.items()},
        )
    except ApplicationError as exc:
        raise PermissionDenied(exc.message) from exc  # the role check is its only refusal
    result["refused"] += [
        {
            "id": d.pk,
            "code": "stale_one_by_one",
            "message": "its section was rewritten: re-approve it on its own, "
            "after reading it against the new text",
        }
        for d in stale
    ]
    report = _report(request, ids=ids, found=found, result=result)
    summary = f"Re-approved {len(report['reapproved'])} of {len(ids)}"
    if report["stale"]:
        summary += f" ({len(report['stale'])} stale)"
    if report["quarantined"]:
        summary += f"; {len(report['quarantined'])} back in quarantine"
    if report["refused"]:
        summary += f"; {len(report['refused'])} refused"
    level = messages.SUCCESS if report["reapproved"] else messages.WARNING
    messages.add_message(request, level, summary + ".")
    if wants_fragment(request):
        context = {**_orphans_context(request), "report": report}
        return render_action(request, f"{ORPHANS}#rows", context)
    return redirect_back("reviews:orphans")


@require_role
@require_POST
def orphans_notice_seen(request, pk: int):
    notice = orphan_notice_get(workspace=request.workspace, pk=pk)
    if notice is None:
        raise Http404("No such notice in this workspace.")
    try:
        orphan_notice_mark_seen(notice=notice, actor=actor_for(request))
    except ApplicationError as exc:
        raise PermissionDenied(exc.message) from exc
    if wants_fragment(request):
        return render_action(request, REMOVED, {})
    return redirect_back("reviews:orphans")
