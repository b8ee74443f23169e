"""Agent API: knowledge endpoints (see agents/urls.py)."""

urlpatterns: list = []
