"""Agent API: skills endpoints (see agents/urls.py)."""

urlpatterns: list = []
