"""The real URLconf plus the bare DRF view (see server_settings.py)."""

from django.urls import include, path
from rest_framework.response import Response
from rest_framework.views import APIView


class BareApi(APIView):
    def post(self, request):
        _ = request.data  # parse the body, as a real view does
        return Response({"ok": True}, status=201)


urlpatterns = [
    path("api/v1/_bench/bare/", BareApi.as_view()),
    path("", include("cairn.urls")),
]
