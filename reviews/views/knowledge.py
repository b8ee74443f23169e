"""The knowledge browser: search with the same hybrid recall agents get, browse and
filter, and act on one item (edit, archive, restore, delete) through the knowledge
services, as a person.

Searching here is a person looking, not an agent using memory: it calls the recall
*selector* (``knowledge_search``), which reads only, so neither confidence nor the
use counts move.
"""

from __future__ import annotations

import logging

from django.contrib import messages
from django.http import Http404
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST

from cairn.errors import ApplicationError
from memory.core.actors import Actor
from memory.core.embedders import EmbeddingError
from memory.core.embeddings import get_embedder
from memory.core.selectors import audit_event_for_targets
from memory.core.text import WORD
from memory.core.trust import channel_weighs
from memory.knowledge.recall import knowledge_search
from memory.knowledge.selectors import (
    KNOWLEDGE_ORDER,
    knowledge_browse,
    knowledge_get,
    knowledge_ledger,
    knowledge_lineage,
    knowledge_similarities,
    search_cutoff,
    word_lexemes,
)
from memory.knowledge.services import (
    knowledge_delete,
    knowledge_forget,
    knowledge_restore,
    knowledge_update,
)
from memory.lessons.posted_evidence import evidence_confirm_by_person
from memory.models import Category, Knowledge
from reviews.access import require_role
from reviews.forms import KnowledgeEditForm, ReasonForm, form_errors_from
from reviews.highlight import mark_words
from reviews.htmx import redirect_back, render_action, render_page, wants_fragment
from reviews.pagination import paginate

logger = logging.getLogger(__name__)

LIST = "reviews/knowledge.html"
DETAIL = "reviews/knowledge_detail.html"
STATUSES = [("active", "active"), ("archived", "archived"), ("all", "any status")]
TOP_K_CHOICES = (10, 20, 50)
FILTERS = {"q": 500, "category": 16, "context": 200, "entity": 200, "status": 8}


def _filters(request) -> dict:
    f = {name: request.GET.get(name, "").strip()[:cap] for name, cap in FILTERS.items()}
    if f["category"] not in Category.values:
        f["category"] = ""
    if f["status"] not in dict(STATUSES):
        f["status"] = "active"
    f["sensitive"] = request.GET.get("sensitive") == "1"
    try:
        top = int(request.GET.get("top", TOP_K_CHOICES[1]))
    except ValueError:
        top = TOP_K_CHOICES[1]
    f["top"] = top if top in TOP_K_CHOICES else TOP_K_CHOICES[1]
    return f


def _search(workspace, f: dict) -> tuple[list, list[float] | None]:
    """Hybrid recall exactly as the API runs it, minus marking use; (hits, query vector)."""
    try:
        vector = get_embedder().embed_one(f["q"])
    except EmbeddingError:
        logger.exception("query embedding failed; the browser searches full text only")
        vector = None
    hits = knowledge_search(
        workspace=workspace,
        query=f["q"],
        query_embedding=vector,
        top_k=f["top"],
        context=f["context"] or None,
        category=f["category"] or None,
        entity=f["entity"] or None,
        include_sensitive=f["sensitive"],
    )
    return hits, vector


def _marked(workspace, hits: list, vector, query: str) -> tuple[list, list]:
    """Hits above and below the relevance cut-off (``search_cutoff``), each with
    ``marked``: its text escaped with the words that matched the query in ``<mark>``."""
    above, below = search_cutoff(
        hits, knowledge_similarities(workspace=workspace, ids=[h.id for h in hits], vector=vector)
    )
    words = [w for hit in hits for w in WORD.findall(hit.content)]
    lexemes, wanted = word_lexemes(words, query=query) if hits else ({}, set())

    def matched(word: str) -> bool:
        return bool(lexemes.get(word.casefold(), set()) & wanted)

    for hit in hits:
        object.__setattr__(hit, "marked", mark_words(hit.content, matched))
    return above, below


def _with_all(request) -> str:
    params = request.GET.copy()
    params["all"] = "1"
    return f"{reverse('reviews:knowledge')}?{params.urlencode()}"


@require_role
@require_GET
def knowledge(request):
    """Search mode (a query over active items: ranked hits, no paging past ``top``), or
    browse mode (newest first, keyset-paged; archived items too; a query matches words)."""
    f = _filters(request)
    workspace = request.workspace
    context = {
        **f,
        "statuses": STATUSES,
        "categories": Category.values,
        "top_choices": TOP_K_CHOICES,
        "list_url": reverse("reviews:knowledge"),
        "filtered": any(f[name] for name in ("q", "category", "context", "entity"))
        or f["status"] != "active",
    }
    if f["q"] and f["status"] == "active":
        hits, vector = _search(workspace, f)
        above, below = _marked(workspace, hits, vector, f["q"])
        show_all = request.GET.get("all") == "1"
        context.update(
            {
                "mode": "search",
                "hits": hits,
                "shown": hits if show_all else above,
                "below": below,
                "below_ids": {hit.id for hit in below},
                "show_all": show_all,
                "vector_used": vector is not None,
                "all_url": _with_all(request),
            }
        )
    else:
        queryset = knowledge_browse(
            workspace=workspace,
            category=f["category"] or None,
            context=f["context"] or None,
            entity=f["entity"] or None,
            status=f["status"],
            q=f["q"] or None,
            include_sensitive=f["sensitive"],
        )
        context.update(
            {"mode": "browse", "page": paginate(request, queryset, ordering=KNOWLEDGE_ORDER)}
        )
    return render_page(request, LIST, context, partial="rows")


def _item_or_404(request, pk: int) -> Knowledge:
    try:
        return knowledge_get(workspace=request.workspace, item_id=pk)
    except ApplicationError:
        raise Http404("No such knowledge item in this workspace.") from None


def _detail_context(request, item: Knowledge, **extra) -> dict:
    versions = knowledge_lineage(item=item)
    ids = [row.pk for row in versions]
    ledger = knowledge_ledger(item_ids=ids)
    for row in versions:
        row.changes = ledger[row.pk]
    earned = any(
        channel_weighs(change.channel) and change.after > change.before
        for row in versions
        for change in row.changes
    )
    return {
        "item": item,
        "weight": "earned" if earned else "claimed",
        "head": versions[-1] if versions else item,
        "versions": versions,
        "activity": audit_event_for_targets(
            workspace=request.workspace, target_type="knowledge", target_ids=ids
        ),
        "categories": Category.values,
        "errors": {},
        **extra,
    }


@require_role
@require_GET
def knowledge_detail(request, pk: int):
    item = _item_or_404(request, pk)
    return render_page(request, DETAIL, _detail_context(request, item), partial="knowledge_main")


def _person(request) -> Actor:
    return Actor.for_user(request.user)


def _answer(request, item: Knowledge, *, status: int = 200, shown_pk: int | None = None, **extra):
    if not wants_fragment(request):
        return redirect_back("reviews:knowledge_detail", item.pk)
    context = _detail_context(request, _item_or_404(request, item.pk), **extra)
    response = render_action(request, f"{DETAIL}#knowledge_main", context, status=status)
    if status == 200 and shown_pk is not None and shown_pk != item.pk:
        response["HX-Push-Url"] = reverse("reviews:knowledge_detail", args=[item.pk])
    return response


def _refused(request, item: Knowledge, errors: dict):
    if wants_fragment(request):
        return _answer(request, item, status=422, errors=errors)
    messages.error(request, next(iter(errors.values())))
    return redirect_back("reviews:knowledge_detail", item.pk)


def _reason(request, item: Knowledge, name: str):
    form = ReasonForm(request.POST)
    if form.is_valid():
        return form.cleaned_data["reason"], None
    return None, _refused(request, item, {name: form.first_error()})


def _item_act(request, pk: int, *, name: str, service):
    """A person's action on one item: ``(what the service returned, None)``, or
    ``(None, the refusal to answer with)`` when the reason or the service says no."""
    item = _item_or_404(request, pk)
    reason, refused = _reason(request, item, name)
    if refused:
        return None, refused
    try:
        result = service(
            workspace=request.workspace, item_id=item.pk, actor=_person(request), reason=reason
        )
    except ApplicationError as exc:
        return None, _refused(request, item, {"action": exc.message})
    return result, None


def _status_change(request, pk: int, *, name: str, service, done: str):
    """Archive or restore one item; ``done`` (with ``{pk}``) is the success message."""
    item, refused = _item_act(request, pk, name=name, service=service)
    if refused:
        return refused
    messages.success(request, done.format(pk=item.pk))
    return _answer(request, item)


@require_role
@require_POST
def knowledge_confirm(request, pk: int):
    """A person's confirmation: ``user_confirmed`` evidence with the reviewer as actor."""

    def confirm(*, workspace, item_id, actor, reason):
        return evidence_confirm_by_person(
            workspace=workspace,
            target_type="knowledge",
            target_id=item_id,
            actor=actor,
            reason=reason,
        )

    result, refused = _item_act(request, pk, name="confirm", service=confirm)
    if refused:
        return refused
    messages.success(
        request,
        f"Item {pk} confirmed by you: strength {result.before:.2f} → {result.after:.2f}.",
    )
    return _answer(request, result.target)


@require_role
@require_POST
def knowledge_archive(request, pk: int):
    return _status_change(
        request,
        pk,
        name="archive",
        service=knowledge_forget,
        done="Item {pk} archived: out of recall, kept, restorable.",
    )


@require_role
@require_POST
def knowledge_restore_view(request, pk: int):
    return _status_change(
        request,
        pk,
        name="restore",
        service=knowledge_restore,
        done="Item {pk} restored: recall finds it again.",
    )


@require_role
@require_POST
def knowledge_delete_view(request, pk: int):
    """A person's real delete (the item and its older versions), audited without content."""
    deleted, refused = _item_act(request, pk, name="delete", service=knowledge_delete)
    if refused:
        return refused
    messages.success(
        request,
        f"Item {pk} deleted for good ({deleted} row{'s' if deleted != 1 else ''} with its "
        "older versions). The audit log keeps who and why, not the content.",
    )
    if not wants_fragment(request):
        return redirect_back("reviews:knowledge")
    context = {"deleted_pk": pk, "deleted": deleted, "list_url": reverse("reviews:knowledge")}
    return render_action(request, f"{DETAIL}#deleted", context)


@require_role
@require_POST
def knowledge_edit(request, pk: int):
    """Through ``knowledge_update``: new content supersedes (the page then shows the new
    version); other fields change in place."""
    item = _item_or_404(request, pk)
    form = KnowledgeEditForm(request.POST)
    result = None
    if form.is_valid():
        data = form.cleaned_data
        fields = ("content", "category", "context", "entity", "domain", "sensitive")
        changes = {name: data[name] for name in fields if data[name] != getattr(item, name)}
        try:
            result = knowledge_update(
                workspace=request.workspace,
                item_id=item.pk,
                actor=_person(request),
                changes=changes,
                reason=data["reason"],
            )
        except ApplicationError as exc:
            form_errors_from(form, exc)
    if result is None:
        if wants_fragment(request):
            return _answer(request, item, status=422, edit_form=form)
        messages.error(request, form.first_error())
        return redirect_back("reviews:knowledge_detail", item.pk)
    if result.supersedes:
        messages.success(
            request, f"Saved as item {result.item.pk}; item {item.pk} is kept in its history."
        )
    else:
        messages.success(request, f"Item {item.pk} saved.")
    return _answer(request, result.item, shown_pk=item.pk)
