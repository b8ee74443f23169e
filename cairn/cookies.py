"""Session and CSRF cookies marked ``Secure`` whenever the page was served over HTTPS.

Django's SESSION_COOKIE_SECURE and CSRF_COOKIE_SECURE are fixed at start-up (set
from SITE_URL, or the environment). Behind a reverse proxy that ends TLS, the
request reaching Django is plain HTTP; with CAIRN_BEHIND_HTTPS_PROXY set, Django
reads the proxy's X-Forwarded-Proto and ``request.is_secure()`` is true, and this
middleware marks the cookies ``Secure`` for that response even if the settings
did not, so a cookie given over HTTPS is never sent back over plain HTTP.
"""

from __future__ import annotations

from django.conf import settings


class SecureCookiesMiddleware:
    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        response = self.get_response(request)
        if request.is_secure():
            for name in (settings.SESSION_COOKIE_NAME, settings.CSRF_COOKIE_NAME):
                if name in response.cookies:
                    response.cookies[name]["secure"] = True
        return response
