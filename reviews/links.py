"""Every internal link of the review UI names its workspace (``?ws=<name>``).

Templates build links in many ways (``{% url %}``, a view's ``list_url``, a
pagination query glued on, a redirect), and each one that forgot ``{{ ws_query }}``
was a link that opened in whatever workspace the session happened to be in. So the
rule lives in one place every review page goes through: this middleware reads the
HTML the view rendered and gives every link, form and htmx attribute that resolves
to a review view the current workspace, and a redirect's ``Location`` too. A GET form
gets a hidden ``ws`` field (a browser drops the query string of a GET form's action),
which htmx leaves out (``hx-params="not ws"``: its request URL names it already).

Which URL needs it is decided by the URL resolver (the ``reviews`` namespace), not by
what the text looks like; static files, the API, the docs and the login page don't.
A link that already names a workspace is left alone (a switcher may name another).
"""

from __future__ import annotations

import functools
import html
import re
from html.parser import HTMLParser
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from django.urls import Resolver404, resolve

from reviews.access import WORKSPACE_PARAM, current_membership

# Attributes that hold a URL the browser or htmx will request.
URL_ATTRIBUTES = frozenset(
    {"href", "action", "formaction", "hx-get", "hx-post", "hx-put", "hx-patch", "hx-delete"}
)
NAMESPACE = "reviews"


_DIGIT = re.compile(r"\d")


def needs_workspace(path: str) -> bool:
    """Whether ``path`` is served by a review view (which reads ``?ws=``)."""
    # Ids do not change which view serves a path: /lessons/12/ and /lessons/13/ are
    # resolved once, as /lessons/00/ (a page can list hundreds of rows). Digit by digit,
    # so a fixed-length part (a project's 64-character digest) keeps its length.
    return _needs_workspace(_DIGIT.sub("0", path))


@functools.lru_cache(maxsize=4096)
def _needs_workspace(path: str) -> bool:
    # The URLconf does not change while a process runs.
    try:
        match = resolve(path)
    except Resolver404:
        return False
    return NAMESPACE in match.namespaces


def with_workspace(url: str, *, workspace_name: str, current_path: str = "/") -> str:
    """``url`` with ``ws=<workspace_name>`` added, if it is a review URL without one."""
    if not url or url[0] == "#" or url.startswith("javascript:"):
        return url
    parts = urlsplit(url)
    if parts.scheme or parts.netloc:
        return url
    path = parts.path or current_path
    if not path.startswith("/") or not needs_workspace(path):
        return url
    if parts.query and any(
        key == WORKSPACE_PARAM for key, _ in parse_qsl(parts.query, keep_blank_values=True)
    ):
        return url
    pair = urlencode({WORKSPACE_PARAM: workspace_name})
    query = f"{parts.query}&{pair}" if parts.query else pair
    return urlunsplit(("", "", parts.path, query, parts.fragment))


class _StartTags(HTMLParser):
    """Start tags with their offset in the document and their raw text."""

    def __init__(self, text: str):
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[int, str, str, dict[str, str | None]]] = []
        self._line_starts = [0]
        for match in re.finditer("\n", text):
            self._line_starts.append(match.end())
        self.feed(text)
        self.close()

    def handle_starttag(self, tag, attrs):
        line, column = self.getpos()
        raw = self.get_starttag_text() or ""
        self.tags.append((self._line_starts[line - 1] + column, raw, tag, dict(attrs)))

    def handle_startendtag(self, tag, attrs):
        self.handle_starttag(tag, attrs)


def _attribute_pattern(name: str) -> re.Pattern:
    return re.compile(
        r"(\s" + re.escape(name) + r"\s*=\s*)(\"[^\"]*\"|'[^']*'|[^\s>]+)", re.IGNORECASE
    )


_PATTERNS = {name: _attribute_pattern(name) for name in URL_ATTRIBUTES}


def add_workspace_to_html(text: str, *, workspace_name: str, current_path: str) -> str:
    """Every review URL in ``text`` (links, forms, htmx attributes) names the workspace."""
    hidden = f'<input type="hidden" name="{WORKSPACE_PARAM}" value="{html.escape(workspace_name)}">'
    pieces: list[str] = []
    cursor = 0
    for offset, raw, tag, attrs in _StartTags(text).tags:
        new = raw
        for name, value in attrs.items():
            if name not in URL_ATTRIBUTES or value is None:
                continue
            changed = with_workspace(
                value, workspace_name=workspace_name, current_path=current_path
            )
            if changed != value:
                quoted = '"' + html.escape(changed) + '"'
                new = _PATTERNS[name].sub(lambda m, q=quoted: m.group(1) + q, new, count=1)
        if tag == "form" and (attrs.get("method") or "get").lower() == "get":
            action = attrs.get("action") or attrs.get("hx-get") or current_path
            if needs_workspace(urlsplit(action).path or current_path):
                new += hidden
                if "hx-get" in attrs and "hx-params" not in attrs:
                    # htmx sends the URL's ws already: without this, twice (?ws=a&ws=a).
                    new = new[:5] + ' hx-params="not ws"' + new[5:]
        if new != raw and text.startswith(raw, offset):
            pieces.append(text[cursor:offset])
            pieces.append(new)
            cursor = offset + len(raw)
    pieces.append(text[cursor:])
    return "".join(pieces)


class WorkspaceLinksMiddleware:
    """Applies :func:`add_workspace_to_html` to every HTML answer of a review view."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        response = self.get_response(request)
        if getattr(response, "streaming", False):
            return response
        match = getattr(request, "resolver_match", None)
        # Switching workspace is the one view that means to leave the current one.
        if (
            match is None
            or NAMESPACE not in match.namespaces
            or match.url_name == "switch_workspace"
        ):
            return response
        membership = current_membership(request)
        if membership is None:
            return response
        name = membership.workspace.name
        location = response.get("Location")
        if location:
            response["Location"] = with_workspace(
                location, workspace_name=name, current_path=request.path
            )
        for header in ("HX-Redirect", "HX-Location", "HX-Push-Url"):
            value = response.get(header)
            if value and value.startswith("/"):
                response[header] = with_workspace(value, workspace_name=name)
        if not response.get("Content-Type", "").startswith("text/html") or not response.content:
            return response
        charset = response.charset or "utf-8"
        text = response.content.decode(charset)
        changed = add_workspace_to_html(text, workspace_name=name, current_path=request.path)
        if changed != text:
            response.content = changed.encode(charset)
            if response.has_header("Content-Length"):
                response["Content-Length"] = str(len(response.content))
        return response
