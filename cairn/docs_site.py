"""The docs site (built from docs/ by ``make docs`` into ``var/site/``), served at
``/docs/`` so the review UI's help links work on an installation with no other web
server. The pages are the public documentation: no login, no workspace data."""

from __future__ import annotations

from pathlib import Path

from csp.decorators import csp_exempt
from django.conf import settings
from django.http import Http404, HttpResponse
from django.views.static import serve

SITE_DIR = Path(settings.BASE_DIR) / "var" / "site"


@csp_exempt()  # MkDocs Material's pages carry inline scripts of their own
def docs_page(request, path: str = ""):
    """One file of the built site; a folder answers with its index.html."""
    if not SITE_DIR.is_dir():
        return HttpResponse(
            "The docs site is not built here: run `make docs` (`make run` builds it).",
            status=404,
            content_type="text/plain; charset=utf-8",
        )
    if path == "" or path.endswith("/"):
        path += "index.html"
    try:
        return serve(request, path, document_root=SITE_DIR)
    except Http404:
        if not path.endswith(".html") and (SITE_DIR / path / "index.html").is_file():
            return serve(request, path + "/index.html", document_root=SITE_DIR)
        raise
