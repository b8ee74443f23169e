"""Agent API: outcomes endpoints (see agents/urls.py)."""

urlpatterns: list = []
