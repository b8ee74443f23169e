"""Toasts that follow their job: "Export #5 started" stays while the job is queued or
running, and becomes what happened (finished, or failed with a link to why) when it
ends, so no "queued" toast outlives its job.

A followed toast is a flash message tagged ``follow job-<run>`` or ``follow
delivery-<webhook>-<delivery>``; base.html gives it an ``hx-get`` to the job's toast
endpoint (``reviews:jobs_toast``, ``reviews:webhooks_delivery_toast``), polled every
``CAIRN_UI_JOB_POLL_S`` seconds. The endpoint answers 204 (no change) while the job
runs, and the final toast, which no longer polls, once it has ended.
"""

from __future__ import annotations

import re

from django.contrib import messages
from django.http import HttpResponse
from django.shortcuts import render
from django.urls import reverse

FOLLOW = "follow"
_JOB = re.compile(r"\bjob-(\d{1,18})\b")
_DELIVERY = re.compile(r"\bdelivery-(\d{1,18})-(\d{1,18})\b")


def job_toast(request, run, text: str, *, level: int = messages.SUCCESS) -> None:
    """Flash ``text`` about a queued job run; the toast follows the run to its end."""
    messages.add_message(request, level, text, extra_tags=f"{FOLLOW} job-{run.pk}")


def delivery_toast(request, delivery, text: str) -> None:
    """Flash ``text`` about a webhook delivery; the toast follows it to its end."""
    messages.success(
        request, text, extra_tags=f"{FOLLOW} delivery-{delivery.webhook_id}-{delivery.pk}"
    )


def follow_url(tags: str) -> str:
    """The toast endpoint a flash message's tags name, or "" for a plain toast."""
    tags = tags or ""
    if FOLLOW not in tags.split():
        return ""
    if match := _JOB.search(tags):
        return reverse("reviews:jobs_toast", args=[int(match[1])])
    if match := _DELIVERY.search(tags):
        return reverse("reviews:webhooks_delivery_toast", args=[int(match[1]), int(match[2])])
    return ""


def poll_membership(request):
    """Who is polling. ``reviews.access.RoleMiddleware`` has already answered "no change"
    to an ended session or a lost role (``UI_POLLS`` in the roles table), so the poll
    never swaps a login page into the toast."""
    return getattr(request, "membership", None)


def toast_unchanged() -> HttpResponse:
    """The job has not ended (or the session has): htmx keeps the toast as it is."""
    response = HttpResponse(status=204)
    response["Cache-Control"] = "no-store"
    return response


def toast_gone() -> HttpResponse:
    """The job is not this person's to follow (deleted, another workspace): the toast goes."""
    response = HttpResponse("")
    response["Cache-Control"] = "no-store"
    return response


def toast_ended(
    request, *, level: str, text: str, detail: str = "", link: str = "", link_text: str = ""
):
    """The toast's last state: it no longer polls; success fades, an error stays."""
    context = {"level": level, "text": text, "detail": detail, "link": link, "link_text": link_text}
    response = render(request, "reviews/_toast.html", context)
    response["Cache-Control"] = "no-store"
    return response
