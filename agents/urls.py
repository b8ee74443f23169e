from django.urls import path

from agents.apis import core, exports, knowledge, outcomes, skills

app_name = "agents"

urlpatterns = [
    path("agents/me/", core.WhoAmIApi.as_view(), name="whoami"),
]
# Each area keeps its own routes beside its API classes.
urlpatterns += knowledge.urlpatterns
urlpatterns += outcomes.urlpatterns
urlpatterns += skills.urlpatterns
urlpatterns += exports.urlpatterns
