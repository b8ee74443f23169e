"""Webhooks (admin only): add, change, enable or disable, rotate the secret, delete;
each webhook's delivery log, a test event and redelivery of a failed delivery."""

from __future__ import annotations

from django.conf import settings
from django.contrib import messages
from django.http import Http404
from django.shortcuts import render
from django.urls import reverse
from django.utils import timezone
from django.utils.cache import add_never_cache_headers
from django.utils.http import urlencode
from django.views.decorators.http import require_GET, require_POST

from memory.models import DeliveryState
from memory.webhooks.selectors import (
    DELIVERIES_SHOWN,
    delivery_get,
    delivery_list,
    webhook_get,
    webhook_list,
)
from memory.webhooks.services import (
    SUBSCRIBABLE,
    delivery_redeliver,
    webhook_create,
    webhook_delete,
    webhook_secret_rotate,
    webhook_test_send,
    webhook_update,
)
from memory.webhooks.signing import SIGNATURE_HEADER
from reviews.access import (
    WORKSPACE_PARAM,
    actor_for,
    call_service,
    call_service_refusal,
    require_role,
)
from reviews.forms import ReasonForm
from reviews.htmx import redirect_back, render_page
from reviews.toasts import (
    delivery_toast,
    poll_membership,
    toast_ended,
    toast_gone,
    toast_unchanged,
)

LIST = "reviews/webhooks.html"
DETAIL = "reviews/webhook_detail.html"


def _events(chosen=()) -> list[dict]:
    return [
        {"value": str(e), "label": e.label, "checked": str(e) in set(chosen)} for e in SUBSCRIBABLE
    ]


def _list_context(request, **extra) -> dict:
    return {
        "webhooks": webhook_list(workspace=request.workspace),
        "events": _events(extra.pop("chosen", [str(e) for e in SUBSCRIBABLE])),
        "signature_header": SIGNATURE_HEADER,
        **extra,
    }


def _webhook_or_404(request, pk: int):
    webhook = webhook_get(workspace=request.workspace, pk=pk)
    if webhook is None:
        raise Http404("No such webhook in this workspace.")
    return webhook


def _once(request, template: str, context: dict, status: int = 200):
    """A page showing a secret: rendered here, never redirected to, never cached."""
    response = render(request, template, context, status=status)
    add_never_cache_headers(response)
    return response


@require_role
@require_GET
def webhooks(request):
    return render(request, LIST, _list_context(request))


@require_role
@require_POST
def webhooks_create(request):
    url, chosen = request.POST.get("url", ""), request.POST.getlist("events")
    issued, refusal = call_service_refusal(
        lambda: webhook_create(
            workspace=request.workspace, url=url, events=chosen, actor=actor_for(request)
        )
    )
    if refusal is not None:
        # The refusal sits under the field it is about (the URL's, or the events').
        where = "events_error" if "events" in (refusal.fields or {}) else "create_error"
        context = _list_context(request, form_url=url, chosen=chosen, **{where: refusal.message})
        return render(request, LIST, context, status=400)
    messages.success(request, "Webhook added. Copy its secret now: it is shown only once.")
    return _once(request, LIST, _list_context(request, issued=issued))


def _wait(seconds: float) -> str:
    for unit, size in (("h", 3600), ("min", 60)):
        if seconds >= size and seconds % size == 0:
            return f"{int(seconds // size)} {unit}"
    return f"{seconds:g} s"


def _detail_context(request, webhook, **extra) -> dict:
    deliveries = delivery_list(webhook=webhook)
    return {
        "webhook": webhook,
        "events": _events(webhook.events),
        "deliveries": deliveries,
        "deliveries_shown": DELIVERIES_SHOWN,
        "pending": any(d.state == DeliveryState.PENDING for d in deliveries),
        "signature_header": SIGNATURE_HEADER,
        "retry_text": ", then ".join(_wait(s) for s in settings.CAIRN_WEBHOOK_RETRY_S),
        **extra,
    }


@require_role
@require_GET
def webhooks_detail(request, pk: int):
    webhook = _webhook_or_404(request, pk)
    return render_page(request, DETAIL, _detail_context(request, webhook), partial="log")


@require_role
@require_POST
def webhooks_update(request, pk: int):
    webhook = _webhook_or_404(request, pk)
    if "enabled" in request.POST:  # the on/off switch posts only this
        enabled = request.POST["enabled"] == "yes"
        call_service(
            lambda: webhook_update(webhook=webhook, actor=actor_for(request), enabled=enabled)
        )
        messages.success(request, "Webhook enabled." if enabled else "Webhook disabled.")
        back = ("reviews:webhooks",) if request.POST.get("next") == "list" else None
        return redirect_back(*(back or ("reviews:webhooks_detail", pk)))
    chosen = request.POST.getlist("events")
    updated, error = call_service(
        lambda: webhook_update(webhook=webhook, actor=actor_for(request), events=chosen)
    )
    if updated is None:
        context = _detail_context(request, webhook, events_error=error)
        context["events"] = _events(chosen)
        return render(request, DETAIL, context, status=400)
    messages.success(request, "Events saved.")
    return redirect_back("reviews:webhooks_detail", pk)


def _reasoned(request, webhook, template_error_key: str):
    form = ReasonForm(request.POST)
    if form.is_valid():
        return form.cleaned_data["reason"], None
    context = _detail_context(request, webhook, **{template_error_key: form.first_error()})
    return None, render(request, DETAIL, context, status=400)


@require_role
@require_POST
def webhooks_rotate(request, pk: int):
    webhook = _webhook_or_404(request, pk)
    reason, refused = _reasoned(request, webhook, "rotate_error")
    if refused:
        return refused
    issued, error = call_service(
        lambda: webhook_secret_rotate(webhook=webhook, actor=actor_for(request), reason=reason)
    )
    if issued is None:
        return render(
            request, DETAIL, _detail_context(request, webhook, rotate_error=error), status=400
        )
    messages.success(request, "New secret made; the old one no longer verifies. Copy it now.")
    return _once(request, DETAIL, _detail_context(request, issued.webhook, issued=issued))


@require_role
@require_POST
def webhooks_delete(request, pk: int):
    webhook = _webhook_or_404(request, pk)
    reason, refused = _reasoned(request, webhook, "delete_error")
    if refused:
        return refused
    call_service(lambda: webhook_delete(webhook=webhook, actor=actor_for(request), reason=reason))
    messages.success(request, f"Webhook to {webhook.url} deleted, with its delivery log.")
    return redirect_back("reviews:webhooks")


@require_role
@require_POST
def webhooks_test(request, pk: int):
    webhook = _webhook_or_404(request, pk)
    delivery, error = call_service(
        lambda: webhook_test_send(webhook=webhook, actor=actor_for(request))
    )
    if error:
        messages.error(request, error)
    else:
        delivery_toast(request, delivery, "Test event queued; its delivery shows below.")
    return redirect_back("reviews:webhooks_detail", pk)


@require_role
@require_POST
def webhooks_redeliver(request, pk: int, delivery: int):
    webhook = _webhook_or_404(request, pk)
    row = delivery_get(webhook=webhook, pk=delivery)
    if row is None:
        raise Http404("No such delivery for this webhook.")
    sent, error = call_service(lambda: delivery_redeliver(delivery=row, actor=actor_for(request)))
    if error:
        messages.error(request, error)
    else:
        delivery_toast(request, sent, "Sending it again, with a fresh retry schedule.")
    return redirect_back("reviews:webhooks_detail", pk)


@require_GET
def webhooks_delivery_toast(request, pk: int, delivery: int):
    """A followed toast's poll (``reviews.toasts``): no change while an attempt is due now
    or in flight, then what came back: delivered, failed, or failed with a retry due."""
    membership = poll_membership(request)
    if membership is None:
        return toast_unchanged()
    webhook = webhook_get(workspace=membership.workspace, pk=pk)
    row = webhook and delivery_get(webhook=webhook, pk=delivery)
    if row is None or webhook is None:
        return toast_gone()
    if row.state == DeliveryState.PENDING and row.next_retry_at is None:
        return toast_unchanged()
    code = f" (HTTP {row.last_status_code})" if row.last_status_code else ""
    if row.state == DeliveryState.DELIVERED:
        level, text = "success", f"{row.event} delivered{code}."
    elif row.state == DeliveryState.FAILED:
        level, text = "error", f"{row.event} failed after {row.attempts} attempts{code}."
    else:
        level = "warning"
        when = timezone.localtime(row.next_retry_at)
        text = f"{row.event}: attempt {row.attempts} failed{code}; next try at {when:%H:%M}."
    link = reverse("reviews:webhooks_detail", args=[pk])
    return toast_ended(
        request,
        level=level,
        text=text,
        link=f"{link}?{urlencode({WORKSPACE_PARAM: membership.workspace.name})}#delivery-log",
        link_text="See the log",
    )
