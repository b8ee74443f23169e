from django.urls import path

from agents import apis

app_name = "agents"

urlpatterns = [
    path("agents/me/", apis.WhoAmIApi.as_view(), name="whoami"),
]
