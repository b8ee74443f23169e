"""Export downloads (reviewers) and erasure requests (admins).

Export: choose a scope, start a job, watch it, download the file. Erasure:
choose a selector, see what would be deleted per table, type the workspace name,
watch the job, keep the receipt. Every action is a POST with CSRF, role-checked
and audited by the service it calls. A text selector is content: it travels in
POST bodies only, never in a URL.
"""

from __future__ import annotations

import json

from django.conf import settings
from django.contrib import messages
from django.http import FileResponse, Http404, HttpResponse
from django.shortcuts import redirect
from django.urls import reverse
from django.utils.cache import add_never_cache_headers
from django.views.decorators.http import require_GET, require_POST
from django_htmx.http import HttpResponseClientRedirect

from cairn.errors import ApplicationError
from memory.core.selectors import ACTIVE_JOB_STATUSES
from memory.privacy.datamap import TABLES
from memory.privacy.erasure import erasure_preview, erasure_request
from memory.privacy.exports import (
    FORMATS,
    export_download_record,
    export_file_get,
    export_file_missing_why,
    export_files_list,
    export_request,
)
from memory.privacy.selection import ERASURE_SELECTORS, EXPORT_SELECTORS, selector_parse
from memory.privacy.selectors import (
    erasure_examples,
    erasure_receipt_get,
    erasure_receipt_list,
    export_run_get,
    export_run_list,
    receipt_body,
)
from reviews.access import actor_for, require_role
from reviews.htmx import redirect_back, render_action, render_page, wants_fragment
from reviews.pagination import paginate
from reviews.toasts import job_toast
from reviews.views.imports import import_context

EXPORT_KINDS = (
    ("workspace", "Everything in this workspace"),
    ("agent", "One agent"),
    ("project", "One project"),
    ("skill", "One skill"),
)
ERASURE_KINDS = (
    ("agent", "Everything one agent wrote"),
    ("project", "One project"),
    ("entity", "One entity (e.g. person:sarah_chen)"),
    ("context", "One context"),
    ("session", "One session"),
    ("text", "Any text containing…"),
)
ORDER = ("-id",)
# What to type for each erasure kind when the workspace has no value of it yet; once it
# has one, the placeholder is that real value (``erasure_examples``).
ERASURE_HINTS = {
    "agent": "an agent's name, as on the Agents page",
    "entity": "an entity as agents write it, kind:name",
    "context": "a context agents wrote under",
    "session": "a session id from Conversations",
    "text": "any words the rows contain, e.g. a name or an email address",
}


def _selector_data(post, allowed) -> dict:
    """Form fields → selector input: ``kind`` picks which value field counts."""
    kind = post.get("kind", "")
    if kind == "workspace":
        return {}
    if kind == "project":
        return {
            "project_remote": post.get("project_remote", "").strip(),
            "project_path": post.get("project_path", "").strip(),
        }
    if kind not in allowed:
        return {"kind": kind}  # selector_parse names it as not a selector here
    value = post.get("value", "")
    return {kind: value if kind == "text" else value.strip()}


def _form_state(post) -> dict:
    return {
        "kind": post.get("kind", ""),
        "value": post.get("value", ""),
        "project_remote": post.get("project_remote", ""),
        "project_path": post.get("project_path", ""),
    }


# Django's plural of a mass noun reads oddly ("knowledges"): the words people use.
PLAIN_NAMES = {"knowledges": "knowledge items"}


def _table_name(label: str) -> str:
    table = TABLES.get(label)
    if table is None:
        return label
    name = str(table.model._meta.verbose_name_plural)
    return PLAIN_NAMES.get(name, name)


def _rows(counts: dict[str, int]) -> list[dict]:
    return [
        {"label": label, "name": _table_name(label), "count": n}
        for label, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
    ]


# --------------------------------------------------------------------------- exports


def _exports_context(request, **extra) -> dict:
    return {
        **import_context(request),
        "page": paginate(request, export_run_list(workspace=request.workspace), ordering=ORDER),
        "list_url": reverse("reviews:exports"),
        "kinds": EXPORT_KINDS,
        "formats": FORMATS,
        "active_statuses": ACTIVE_JOB_STATUSES,
        "poll_s": settings.CAIRN_UI_JOB_POLL_S,
        "retention_days": settings.CAIRN_RETENTION_EXPORT_DAYS,
        "form": extra.pop("form", {"kind": "workspace"}),
        **extra,
    }


@require_role
@require_GET
def exports(request):
    return render_page(request, "reviews/exports.html", _exports_context(request), partial="rows")


@require_role
@require_POST
def exports_start(request):
    form = {**_form_state(request.POST), "format": request.POST.get("format", "json")}
    try:
        selector = selector_parse(
            workspace=request.workspace,
            data=_selector_data(request.POST, EXPORT_SELECTORS),
            allowed=EXPORT_SELECTORS,
        )
        run = export_request(
            workspace=request.workspace,
            selector=selector,
            fmt=form["format"],
            actor=actor_for(request),
        )
    except ApplicationError as exc:
        if wants_fragment(request):
            context = _exports_context(request, form=form, error=exc.message)
            return render_action(request, "reviews/exports.html#export_form", context, status=422)
        messages.error(request, exc.message)
        return redirect_back("reviews:exports")
    job_toast(request, run, f"Export #{run.pk} started. It appears below when it is ready.")
    if wants_fragment(request):
        # The form comes back fresh, and the list (with the new, polling row) out of band.
        context = _exports_context(request, form={"kind": "workspace"}, started=run)
        return render_action(request, "reviews/exports.html#started", context)
    return redirect_back("reviews:exports")


@require_role
@require_GET
def exports_detail(request, pk: int):
    """One export's row (the poller's fragment); without htmx, the export list."""
    run = export_run_get(workspace=request.workspace, pk=pk)
    if run is None:
        raise Http404("No such export in this workspace.")
    if not wants_fragment(request):
        return redirect("reviews:exports")
    context = {
        "run": run,
        "active_statuses": ACTIVE_JOB_STATUSES,
        "poll_s": settings.CAIRN_UI_JOB_POLL_S,
    }
    return render_page(request, "reviews/exports.html", context, partial="export_row")


@require_role
@require_GET
def exports_download(request, pk: int):
    """The file, to a signed-in reviewer of this workspace only (never a static URL)."""
    run = export_run_get(workspace=request.workspace, pk=pk)
    path = export_file_get(run=run) if run is not None else None
    if path is None:
        raise Http404(export_file_missing_why(run=run))
    export_download_record(run=run, actor=actor_for(request))
    response = FileResponse(
        open(path, "rb"),  # FileResponse closes it
        as_attachment=True,
        filename=path.name,
        content_type="application/x-ndjson" if path.suffix == ".jsonl" else "application/json",
    )
    add_never_cache_headers(response)
    return response


# --------------------------------------------------------------------------- erasures


def _erasure_kinds(workspace) -> list[dict]:
    """The selector kinds with each one's placeholder: a real value of this workspace
    ("e.g. person:sarah_chen") where there is one, else what to type."""
    examples = erasure_examples(workspace=workspace)
    return [
        {
            "value": value,
            "label": label,
            "placeholder": f"e.g. {examples[value]}"
            if value in examples
            else ERASURE_HINTS.get(value, ""),
        }
        for value, label in ERASURE_KINDS
    ]


def _erasures_context(request, **extra) -> dict:
    form = extra.pop("form", {"kind": "entity"})
    kinds = _erasure_kinds(request.workspace)
    return {
        "page": paginate(
            request, erasure_receipt_list(workspace=request.workspace), ordering=ORDER
        ),
        "list_url": reverse("reviews:erasures"),
        "kinds": kinds,
        "placeholder": next(
            (k["placeholder"] for k in kinds if k["value"] == form.get("kind")), ""
        ),
        "form": form,
        "text_min": settings.CAIRN_ERASURE_TEXT_MIN_CHARS,
        **extra,
    }


@require_role
@require_GET
def erasures(request):
    return render_page(request, "reviews/erasures.html", _erasures_context(request), partial="rows")


def _preview_or_error(request):
    form = _form_state(request.POST)
    selector = selector_parse(
        workspace=request.workspace,
        data=_selector_data(request.POST, ERASURE_SELECTORS),
        allowed=ERASURE_SELECTORS,
    )
    preview = erasure_preview(workspace=request.workspace, selector=selector)
    return form, selector, preview


def _preview_context(request, form, selector, preview, **extra) -> dict:
    return {
        "form": form,
        "selector_kind": selector.kind,
        "kind_label": dict(ERASURE_KINDS).get(selector.kind, selector.kind),
        # Erasure deletes every export file of the workspace (one written before may
        # hold these rows): the preview names them, as the certificate counts them.
        "export_files": export_files_list(workspace=request.workspace) if preview.total else [],
        "rows": _rows(preview.counts),
        "recompute": _rows(preview.recompute),
        "kept_matches": _rows(preview.kept_matches),
        "total": preview.total,
        **extra,
    }


@require_role
@require_POST
def erasures_preview(request):
    """What an erasure would delete, per table. A POST: the selector may be content."""
    try:
        form, selector, preview = _preview_or_error(request)
    except ApplicationError as exc:
        context = _erasures_context(request, form=_form_state(request.POST), error=exc.message)
        if wants_fragment(request):
            return render_action(request, "reviews/erasures.html#erasure_form", context, status=422)
        return render_page(request, "reviews/erasures.html", context, partial="rows", status=422)
    context = _preview_context(request, form, selector, preview)
    if wants_fragment(request):
        return render_action(request, "reviews/erasure_preview.html#panel", context)
    response = render_page(request, "reviews/erasure_preview.html", context, partial="panel")
    add_never_cache_headers(response)
    return response


@require_role
@require_POST
def erasures_start(request):
    """Queue the erasure once the workspace name is typed; then its certificate page."""
    try:
        form, selector, preview = _preview_or_error(request)
    except ApplicationError as exc:
        messages.error(request, exc.message)
        if wants_fragment(request):
            return HttpResponseClientRedirect(reverse("reviews:erasures"))
        return redirect_back("reviews:erasures")
    try:
        receipt = erasure_request(
            workspace=request.workspace,
            selector=selector,
            confirm=request.POST.get("confirm", ""),
            actor=actor_for(request),
            reason=request.POST.get("reason", "").strip()[:500],
        )
    except ApplicationError as exc:
        context = _preview_context(
            request,
            form,
            selector,
            preview,
            confirm_error=exc.message,
            reason=request.POST.get("reason", ""),
        )
        if wants_fragment(request):
            return render_action(request, "reviews/erasure_preview.html#panel", context, status=422)
        return render_page(
            request, "reviews/erasure_preview.html", context, partial="panel", status=422
        )
    # The toast follows its job: it says how the erasure ended, not "queued" after it.
    job_toast(
        request, receipt.job_run, f"Erasure #{receipt.pk} queued as run #{receipt.job_run_id}."
    )
    target = reverse("reviews:erasures_detail", args=[receipt.pk])
    if wants_fragment(request):
        return HttpResponseClientRedirect(target)
    return redirect_back("reviews:erasures_detail", receipt.pk)


def _receipt_or_404(request, pk):
    receipt = erasure_receipt_get(workspace=request.workspace, pk=pk)
    if receipt is None:
        raise Http404("No such erasure in this workspace.")
    return receipt


@require_role
@require_GET
def erasures_detail(request, pk: int):
    """Progress while it runs; the certificate once it is done."""
    receipt = _receipt_or_404(request, pk)
    context = {
        "receipt": receipt,
        "run": receipt.job_run,
        "rows": _rows(receipt.counts),
        "remaining": _rows(receipt.remaining),
        "rows_deleted": sum(receipt.counts.values()),
        "active": receipt.status in ("queued", "running"),
        "poll_s": settings.CAIRN_UI_JOB_POLL_S,
        "effects": receipt.effects,
    }
    return render_page(request, "reviews/erasure_detail.html", context, partial="status")


@require_role
@require_GET
def erasures_receipt(request, pk: int):
    """The receipt as a JSON file: counts, digests and times, no content."""
    receipt = _receipt_or_404(request, pk)
    body = json.dumps(receipt_body(receipt), indent=2, sort_keys=True, default=str)
    response = HttpResponse(body + "\n", content_type="application/json")
    response["Content-Disposition"] = (
        f'attachment; filename="erasure-receipt-{receipt.workspace_name}-{receipt.pk}.json"'
    )
    return response
