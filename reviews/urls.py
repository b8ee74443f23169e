from django.urls import path

from reviews import views

app_name = "reviews"

urlpatterns = [
    path("", views.home, name="home"),
    path("dashboard/", views.dashboard, name="dashboard"),
    path("workspace/switch/", views.switch_workspace, name="switch_workspace"),
]
