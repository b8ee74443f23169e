"""The three response shapes every review screen uses.

1. ``render_page``: a GET serves the whole page, or, for htmx, one partial of
   the same template (``"reviews/jobs.html#rows"``). History restores get the
   whole page, because htmx swaps them into ``<body>``.
2. ``render_action``: an htmx action answers with the changed fragment plus,
   out of band, the nav (its queue counters) and any flash messages as toasts.
3. ``redirect_back``: without htmx, an action redirects (303) to the list and
   the flash message shows on the next page.
"""

from __future__ import annotations

from django.http import HttpResponse
from django.shortcuts import redirect, render
from django.template.loader import render_to_string
from django.utils.cache import patch_vary_headers


def wants_fragment(request) -> bool:
    htmx = getattr(request, "htmx", None)
    return bool(htmx) and not htmx.history_restore_request


def _oob(request) -> str:
    """The nav (counters) and pending messages (toasts), marked for out-of-band swaps."""
    return render_to_string("base.html#oob", {"oob": True}, request)


def render_page(request, template: str, context: dict, *, partial: str, status: int = 200):
    if wants_fragment(request):
        response = render(request, f"{template}#{partial}", context, status=status)
        response.content += render_to_string("base.html#toasts_oob", {}, request).encode()
    else:
        response = render(request, template, context, status=status)
    patch_vary_headers(response, ["HX-Request"])
    return response


def render_action(request, template: str, context: dict, *, status: int = 200) -> HttpResponse:
    """An htmx action's answer: ``template`` (a partial) then the out-of-band updates."""
    html = render_to_string(template, context, request) + _oob(request)
    response = HttpResponse(html, status=status)
    patch_vary_headers(response, ["HX-Request"])
    return response


def redirect_back(to: str, *args, **kwargs):
    response = redirect(to, *args, **kwargs)
    response.status_code = 303  # a POST answered with "see the list", never re-POSTed
    return response
