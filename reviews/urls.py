from django.urls import path

from reviews.views import agents, audit, dashboard, jobs

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
]
