from __future__ import annotations

from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.http import HttpResponse, HttpResponseBadRequest
from django.shortcuts import redirect, render
from django.utils import timezone
from django.utils.cache import patch_vary_headers
from django.views.decorators.http import require_GET, require_POST

from memory.core.selectors import job_runs_per_day
from memory.dashboard import (
    confidence_histograms,
    dashboard_counts,
    first_steps,
    lesson_changes,
    lesson_health_counts,
    lessons_per_day,
    review_latency,
)
from memory.identity.services import membership_get
from memory.situations.selectors import situation_counts
from memory.skills.selectors import orphan_notice_list, skill_kpis
from reviews.access import SESSION_KEY, current_membership, require_role
from reviews.charts import Series, bar_chart, line_chart


@login_required
def home(request):
    if current_membership(request) is None:
        return render(request, "reviews/no_workspace.html", status=403)
    return redirect("reviews:dashboard")


def job_runs_chart(days: list[dict]):
    return bar_chart(
        labels=[f"{d['day']:%b} {d['day'].day}" for d in days],
        series=[
            Series("succeeded", [d["succeeded"] for d in days], "ok"),
            Series("failed", [d["failed"] for d in days], "bad"),
            Series("other", [d["other"] for d in days], "muted"),
        ],
        title=f"Job runs per day, last {len(days)} days",
        unit="runs",
        empty_text=f"No job runs in the last {len(days)} days",
    )


DELTA_CHART_STATUSES = ("staged", "quarantined", "orphaned", "active", "archived")
DELTA_CHART_TIERS = (("1", "tier 1 · tool-hints", "warn"), ("3", "tier 3 · prose", "accent"))


def deltas_chart(by_tier_status: dict):
    """Learned deltas per status (one column each), stacked by tier."""
    return bar_chart(
        labels=list(DELTA_CHART_STATUSES),
        series=[
            Series(
                label,
                [by_tier_status.get(tier, {}).get(status, 0) for status in DELTA_CHART_STATUSES],
                tone,
            )
            for tier, label, tone in DELTA_CHART_TIERS
        ],
        title="Learned deltas by status and tier",
        unit="deltas",
        width=560,
        height=200,
        empty_text="No learned deltas yet",
    )


def lessons_chart(days: list[dict]):
    return line_chart(
        labels=[f"{d['day']:%b} {d['day'].day}" for d in days],
        series=[
            Series("learned", [d["learned"] for d in days], "ok"),
            Series("retired", [d["retired"] for d in days], "bad"),
        ],
        title=f"Lessons learned and retired per day, last {len(days)} days",
        unit="lessons",
        empty_text=f"No lesson was learned or retired in the last {len(days)} days",
    )


def histogram_chart(counts: list[int], *, title: str, what: str, tone: str):
    bins = len(counts)
    labels = [f"{i / bins:.1f}–{(i + 1) / bins:.1f}" for i in range(bins)]
    return bar_chart(
        labels=labels,
        series=[Series(what, counts, tone)],
        title=title,
        unit=what,
        width=480,
        height=200,
        empty_text=f"No active {what} yet",
    )


@require_role
@require_GET
def dashboard(request):
    """What needs a person (the queues), and whether memory is healthy (trends)."""
    workspace = request.workspace
    days = job_runs_per_day(workspace=workspace)
    kpis = skill_kpis(workspace=workspace)
    trend = lessons_per_day(workspace=workspace)
    histograms = confidence_histograms(workspace=workspace)
    steps = first_steps(workspace=workspace)
    context = {
        "steps": steps,
        "getting_started": not all(steps.values()),
        "counts": dashboard_counts(workspace=workspace),
        "situations": situation_counts(workspace=workspace, now=timezone.now()),
        "jobs_chart": job_runs_chart(days),
        # Linked to the job list filtered from the chart's first day: the same runs.
        "failed_runs": sum(d["failed"] for d in days),
        "jobs_since": days[0]["day"],
        "jobs_days": len(days),
        "site_url": settings.SITE_URL,
        "kpis": kpis,
        "deltas_chart": deltas_chart(kpis["deltas_by_tier_status"]),
        "notices": orphan_notice_list(workspace=workspace)[:3],
        "health": lesson_health_counts(workspace=workspace),
        "latency": review_latency(workspace=workspace),
        # Lessons (not events), by the rule the Lessons list's "changed since" filter
        # applies: each number is the rows its link shows.
        "changes": lesson_changes(workspace=workspace),
        "trend_days": len(trend),
        "lessons_chart": lessons_chart(trend),
        "lesson_histogram": histogram_chart(
            histograms["lessons"],
            title="Confidence of active lessons",
            what="lessons",
            tone="accent",
        ),
        "knowledge_histogram": histogram_chart(
            histograms["knowledge"],
            title="Strength of active knowledge",
            what="items",
            tone="ok",
        ),
    }
    return render(request, "reviews/dashboard.html", context)


@login_required
@require_POST
def switch_workspace(request):
    try:
        workspace_id = int(request.POST.get("workspace", ""))
    except ValueError:
        return HttpResponseBadRequest("workspace must be an id")
    if membership_get(user=request.user, workspace_id=workspace_id) is None:
        return HttpResponseBadRequest("not a member of that workspace")
    request.session[SESSION_KEY] = workspace_id
    return redirect("reviews:dashboard")


@require_GET
def counts(request):
    """Every counter a page shows, as out-of-band swaps (polled by base.html).

    A poll from a tab whose session ended answers 204, not a redirect to the
    login page: a background refresh must never take the person off a page
    where they may be typing.
    """
    membership = current_membership(request)
    if membership is None:
        return HttpResponse(status=204)
    response = render(request, "base.html#counts_oob", {})
    patch_vary_headers(response, ["HX-Request"])
    response["Cache-Control"] = "no-store"
    return response
