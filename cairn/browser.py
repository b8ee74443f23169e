"""Middleware only a browser needs, skipped for the agent API.

Agent API requests carry a bearer token and no session: they never read or write
a flash message. Django's message middleware still made each one its storage (a
signed-cookie reader and a session reader), about 4% of a gunicorn worker's time
on an outcome. The review UI and the admin keep it unchanged.
"""

from __future__ import annotations

from django.contrib.messages.middleware import MessageMiddleware as DjangoMessageMiddleware

API_PREFIX = "/api/"


class MessageMiddleware(DjangoMessageMiddleware):
    def __call__(self, request):
        if request.path_info.startswith(API_PREFIX):
            return self.get_response(request)
        return super().__call__(request)
