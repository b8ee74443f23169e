"""The knowledge browser's search: a relevance cut-off, and the matched words marked."""

import pytest

from memory.knowledge.selectors import search_cutoff
from reviews.highlight import mark_words
from tests.factories.knowledge import KnowledgeFactory

pytestmark = pytest.mark.django_db

HX = {"HTTP_HX_REQUEST": "true"}


@pytest.fixture
def viewer(member_client, workspace):
    return member_client(workspace=workspace, role="viewer")


class Hit:
    def __init__(self, pk, text_rank=None):
        self.id, self.text_rank = pk, text_rank


def test_the_cut_off_keeps_word_matches_and_close_meanings():
    hits = [Hit(1, text_rank=1), Hit(2), Hit(3), Hit(4)]
    above, below = search_cutoff(hits, {1: 0.2, 2: 0.8, 3: 0.55, 4: 0.62})
    # best 0.8 → needed max(0.3, 0.6): 2 and 4 are close, 3 is not; 1 matched words.
    assert [h.id for h in above] == [1, 2, 4] and [h.id for h in below] == [3]


def test_the_cut_off_has_an_absolute_floor():
    above, below = search_cutoff([Hit(1), Hit(2)], {1: 0.25, 2: 0.1})
    assert above == [] and [h.id for h in below] == [1, 2]


def test_without_vectors_only_word_matches_stay():
    above, below = search_cutoff([Hit(1, text_rank=1), Hit(2)], {})
    assert [h.id for h in above] == [1] and [h.id for h in below] == [2]


def test_mark_words_escapes_and_marks():
    html = str(mark_words("The <b>staging</b> host & the staging db", lambda w: w == "staging"))
    assert html == (
        "The &lt;b&gt;<mark>staging</mark>&lt;/b&gt; host &amp; the <mark>staging</mark> db"
    )


def test_mark_words_shows_the_part_with_the_first_match():
    text = "filler " * 60 + "the needle is here " + "tail " * 60
    html = str(mark_words(text, lambda w: w == "needle", limit=100))
    assert html.startswith("…") and html.endswith("…")
    assert "<mark>needle</mark>" in html and len(html) < 140


def test_search_lists_only_hits_above_the_cut_off_and_marks_words(viewer, workspace):
    host = KnowledgeFactory(
        workspace=workspace, content="The staging database host is db3.internal."
    )
    tea = KnowledgeFactory(workspace=workspace, content="Sarah prefers tea over coffee.")
    html = viewer.get("/knowledge/?q=staging+databases", **HX).content.decode()
    assert f'id="knowledge-{host.pk}"' in html
    assert "<mark>staging</mark> <mark>database</mark> host" in html  # stemmed: databases
    assert f'id="knowledge-{tea.pk}"' not in html
    assert "1 more below the cut-off" in html
    shown = viewer.get("/knowledge/?q=staging+databases&all=1", **HX).content.decode()
    assert f'id="knowledge-{tea.pk}"' in shown and "below the cut-off</span>" in shown
    assert "more below the cut-off" not in shown


def test_the_query_is_escaped_in_marks(viewer, workspace):
    KnowledgeFactory(workspace=workspace, content="Use <script> tags sparingly.")
    html = viewer.get("/knowledge/?q=script+tags", **HX).content.decode()
    assert "&lt;<mark>script</mark>&gt; <mark>tags</mark>" in html
    assert "<script>" not in html
