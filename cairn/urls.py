from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path, re_path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView

from agents.apis.health import HealthApi, HealthSlashApi
from cairn.docs_site import docs_page
from reviews.views.login import LandingLoginView

urlpatterns = [
    path("healthz", HealthApi.as_view(), name="healthz"),
    path("healthz/", HealthSlashApi.as_view(), name="healthz-slash"),
    path("api/v1/schema/", SpectacularAPIView.as_view(), name="schema"),
    path("api/v1/docs/", SpectacularSwaggerView.as_view(url_name="schema"), name="docs"),
    path("api/v1/", include("agents.urls")),
    path("admin/", admin.site.urls),
    re_path(r"^docs/(?P<path>.*)$", docs_page, name="docs-site"),
    path("login/", LandingLoginView.as_view(), name="login"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("", include("reviews.urls")),
]

handler400 = "cairn.errors.json_400_or_html"
handler403 = "reviews.session.forbidden"
handler404 = "cairn.errors.json_404_or_html"
handler500 = "cairn.errors.json_500_or_html"
