from django.urls import path, re_path

from reviews.views import (
    agents,
    audit,
    contradictions,
    dashboard,
    jobs,
    lessons,
    outcomes,
    projects,
)

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
    path("lessons/", lessons.lessons, name="lessons"),
    path("lessons/<int:pk>/", lessons.lessons_detail, name="lessons_detail"),
    path("lessons/<int:pk>/retire/", lessons.lessons_retire, name="lessons_retire"),
    path("lessons/<int:pk>/restore/", lessons.lessons_restore, name="lessons_restore"),
    path("lessons/<int:pk>/pin/", lessons.lessons_pin, name="lessons_pin"),
    path("lessons/<int:pk>/unpin/", lessons.lessons_unpin, name="lessons_unpin"),
    path("lessons/<int:pk>/seal/", lessons.lessons_seal, name="lessons_seal"),
    path("lessons/<int:pk>/unseal/", lessons.lessons_unseal, name="lessons_unseal"),
    path("lessons/<int:pk>/edit/", lessons.lessons_edit, name="lessons_edit"),
    re_path(
        r"^projects/(?P<digest>[0-9a-f]{64})/label/$",
        projects.projects_label,
        name="projects_label",
    ),
    path("outcomes/", outcomes.outcomes, name="outcomes"),
    path("outcomes/<int:pk>/", outcomes.outcomes_detail, name="outcomes_detail"),
    path("contradictions/", contradictions.contradictions, name="contradictions"),
    path(
        "contradictions/<int:pk>/<slug:resolution>/",
        contradictions.contradictions_resolve,
        name="contradictions_resolve",
    ),
]
