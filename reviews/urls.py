from django.urls import path

from reviews.views import dashboard

app_name = "reviews"

urlpatterns = [
    path("", dashboard.home, name="home"),
    path("dashboard/", dashboard.dashboard, name="dashboard"),
    path("workspace/switch/", dashboard.switch_workspace, name="switch_workspace"),
]
