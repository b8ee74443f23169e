from django.urls import path

from reviews.views import agents, audit, dashboard, deltas, jobs, privacy, skills

app_name = "reviews"

# URL names are "<section>" or "<section>_<verb>": the nav marks <section> as current.
urlpatterns = [
    path("", dashboard.home, name="home"),
    path("dashboard/", dashboard.dashboard, name="dashboard"),
    path("workspace/switch/", dashboard.switch_workspace, name="switch_workspace"),
    path("agents/", agents.agents, name="agents"),
    path("agents/new/", agents.agents_create, name="agents_create"),
    path("agents/<int:pk>/tokens/", agents.agents_token_issue, name="agents_token_issue"),
    path("agents/tokens/<int:pk>/revoke/", agents.agents_token_revoke, name="agents_token_revoke"),
    path("jobs/", jobs.jobs, name="jobs"),
    path("jobs/<int:pk>/", jobs.jobs_detail, name="jobs_detail"),
    path("audit/", audit.audit, name="audit"),
    path("deltas/staged/", deltas.staged, name="staged"),
    path("deltas/staged/<int:pk>/approve/", deltas.staged_approve, name="staged_approve"),
    path("deltas/staged/<int:pk>/reject/", deltas.staged_reject, name="staged_reject"),
    path("deltas/quarantine/", deltas.quarantine, name="quarantine"),
    path(
        "deltas/quarantine/<int:pk>/confirm/",
        deltas.quarantine_confirm,
        name="quarantine_confirm",
    ),
    path("deltas/quarantine/<int:pk>/reject/", deltas.quarantine_reject, name="quarantine_reject"),
    path("deltas/orphans/", deltas.orphans, name="orphans"),
    path("deltas/orphans/reapprove/", deltas.orphans_reapprove, name="orphans_reapprove"),
    path(
        "deltas/orphans/<int:pk>/reapprove/",
        deltas.orphans_reapprove_one,
        name="orphans_reapprove_one",
    ),
    path("deltas/orphans/<int:pk>/discard/", deltas.orphans_discard, name="orphans_discard"),
    path(
        "deltas/orphans/notices/<int:pk>/seen/",
        deltas.orphans_notice_seen,
        name="orphans_notice_seen",
    ),
    path("skills/", skills.skills, name="skills"),
    path("skills/<str:name>/", skills.skills_detail, name="skills_detail"),
    path("skills/<str:name>/deltas/<int:pk>/revert/", skills.skills_revert, name="skills_revert"),
    path("skills/<str:name>/reset/", skills.skills_reset, name="skills_reset"),
    path("facts/", skills.skills_facts, name="skills_facts"),
    path("exports/", privacy.exports, name="exports"),
    path("exports/start/", privacy.exports_start, name="exports_start"),
    path("exports/<int:pk>/", privacy.exports_detail, name="exports_detail"),
    path("exports/<int:pk>/download/", privacy.exports_download, name="exports_download"),
    path("erasures/", privacy.erasures, name="erasures"),
    path("erasures/preview/", privacy.erasures_preview, name="erasures_preview"),
    path("erasures/start/", privacy.erasures_start, name="erasures_start"),
    path("erasures/<int:pk>/", privacy.erasures_detail, name="erasures_detail"),
    path("erasures/<int:pk>/receipt.json", privacy.erasures_receipt, name="erasures_receipt"),
]
