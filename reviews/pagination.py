"""Keyset pagination for the review lists.

A page is "the next ``size`` rows after this row in the list's order", found
with the same index the order uses. Unlike ``OFFSET``, page 200 costs what
page 1 costs, and no ``COUNT(*)`` runs: we fetch ``size + 1`` rows and the
extra one says whether there is a next page.

The ordering must end in a unique, non-null field (``id``), so every row has
exactly one place in it. Cursors are opaque, URL-safe strings; a cursor that
does not decode is treated as "the first page" rather than an error.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date, datetime

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db.models import Q, QuerySet

from cairn.db_router import PRIMARY, read_on_replica


@dataclass(frozen=True)
class Page:
    items: list
    size: int
    next_cursor: str | None = None  # rows after the last item
    prev_cursor: str | None = None  # rows before the first item
    is_first: bool = True
    next_query: str = ""  # query strings for links, other parameters kept
    prev_query: str = ""
    first_query: str = ""

    def __iter__(self):
        return iter(self.items)

    def __len__(self) -> int:
        return len(self.items)

    @property
    def has_other_pages(self) -> bool:
        return bool(self.next_cursor or self.prev_cursor or not self.is_first)


def _parse_ordering(ordering: Sequence[str]) -> list[tuple[str, bool]]:
    return [(f.lstrip("-"), f.startswith("-")) for f in ordering]


def _encode(values: list) -> str:
    plain = [v.isoformat() if isinstance(v, (datetime, date)) else v for v in values]
    raw = json.dumps(plain, separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def _decode(cursor: str, model, fields: list[tuple[str, bool]]) -> list | None:
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        plain = json.loads(raw)
    except (binascii.Error, ValueError, UnicodeDecodeError):
        return None
    if not isinstance(plain, list) or len(plain) != len(fields):
        return None
    values = []
    for (name, _desc), value in zip(fields, plain, strict=True):
        if value is None or isinstance(value, (dict, list)):
            return None
        try:
            values.append(model._meta.get_field(name).to_python(value))
        except (ValidationError, ValueError, TypeError):
            return None
    return values


def _beyond(fields: list[tuple[str, bool]], values: list, *, backwards: bool) -> Q:
    """Rows strictly after ``values`` in the ordering (before it when ``backwards``)."""
    condition = Q()
    for i, (name, desc) in enumerate(fields):
        op = "lt" if desc != backwards else "gt"
        term = Q(**{f"{name}__{op}": values[i]})
        for (prev_name, _), prev_value in zip(fields[:i], values[:i], strict=True):
            term &= Q(**{prev_name: prev_value})
        condition |= term
    return condition


def _key(item, fields) -> list:
    return [getattr(item, name) for name, _ in fields]


def _reversed(ordering: Sequence[str]) -> list[str]:
    return [f[1:] if f.startswith("-") else f"-{f}" for f in ordering]


def keyset_page(
    queryset: QuerySet,
    *,
    ordering: Sequence[str],
    size: int,
    after: str | None = None,
    before: str | None = None,
) -> Page:
    """One page of ``queryset`` in ``ordering``: the first, or the one after/before a cursor."""
    fields = _parse_ordering(ordering)
    model = queryset.model
    if before and (values := _decode(before, model, fields)) is not None:
        rows = list(
            queryset.filter(_beyond(fields, values, backwards=True)).order_by(*_reversed(ordering))[
                : size + 1
            ]
        )
        if len(rows) > size:
            items = rows[:size][::-1]
            return Page(
                items=items,
                size=size,
                next_cursor=_encode(_key(items[-1], fields)),
                prev_cursor=_encode(_key(items[0], fields)),
                is_first=False,
            )
        # Fewer than a page before the cursor: that is the first page; show it full.
        after = None
    elif after and (values := _decode(after, model, fields)) is not None:
        rows = list(
            queryset.filter(_beyond(fields, values, backwards=False)).order_by(*ordering)[
                : size + 1
            ]
        )
        items = rows[:size]
        return Page(
            items=items,
            size=size,
            next_cursor=_encode(_key(items[-1], fields)) if len(rows) > size else None,
            prev_cursor=_encode(_key(items[0], fields)) if items else None,
            is_first=False,
        )
    rows = list(queryset.order_by(*ordering)[: size + 1])
    items = rows[:size]
    return Page(
        items=items,
        size=size,
        next_cursor=_encode(_key(items[-1], fields)) if len(rows) > size else None,
    )


def page_size(request) -> int:
    try:
        size = int(request.GET.get("size", settings.CAIRN_UI_PAGE_SIZE))
    except ValueError:
        size = settings.CAIRN_UI_PAGE_SIZE
    return max(1, min(size, settings.CAIRN_UI_PAGE_SIZE_MAX))


def paginate(request, queryset: QuerySet, *, ordering: Sequence[str]) -> Page:
    """The page the request asks for (``?after=``/``?before=``/``?size=``), with link queries.

    Every UI list reads its page here, on the read replica when there is one that
    has replayed every write so far (cairn/db_router.py)."""

    def read(alias: str) -> Page:
        page = keyset_page(
            queryset.using(alias),
            ordering=ordering,
            size=page_size(request),
            after=request.GET.get("after"),
            before=request.GET.get("before"),
        )
        for item in page.items:
            if hasattr(item, "_state"):
                item._state.db = PRIMARY  # what the template reads from it later
        return page

    page = read_on_replica(read)

    def query(**cursor) -> str:
        params = request.GET.copy()
        params.pop("after", None)
        params.pop("before", None)
        params.update({k: v for k, v in cursor.items() if v})
        encoded = params.urlencode()
        return f"?{encoded}" if encoded else "?"

    return Page(
        items=page.items,
        size=page.size,
        next_cursor=page.next_cursor,
        prev_cursor=page.prev_cursor,
        is_first=page.is_first,
        next_query=query(after=page.next_cursor) if page.next_cursor else "",
        prev_query=query(before=page.prev_cursor) if page.prev_cursor else "",
        first_query=query(),
    )
