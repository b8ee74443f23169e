"""Login that lands somewhere useful: the workspace with something to review."""

from __future__ import annotations

from django.contrib.auth.views import LoginView

from memory.review.landing import workspace_landing
from reviews.access import SESSION_KEY


class LandingLoginView(LoginView):
    """Django's login, then the session's workspace is set by ``workspace_landing``
    (the default one, or the busiest non-empty one when the default is empty)."""

    def form_valid(self, form):
        response = super().form_valid(form)
        landing = workspace_landing(user=form.get_user())
        if landing is not None:
            self.request.session[SESSION_KEY] = landing.pk
        return response
