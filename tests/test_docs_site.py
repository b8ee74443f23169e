"""The built docs site is served at /docs/, where the review UI's help links point."""

import pytest

from cairn import docs_site


@pytest.fixture
def site(tmp_path, monkeypatch):
    (tmp_path / "concepts" / "lessons").mkdir(parents=True)
    (tmp_path / "index.html").write_text("<h1>Cairn docs</h1>")
    (tmp_path / "concepts" / "lessons" / "index.html").write_text("<h1>Lessons</h1>")
    monkeypatch.setattr(docs_site, "SITE_DIR", tmp_path)
    return tmp_path


def test_it_serves_the_index_and_a_page_by_its_folder(client, site):
    assert b"Cairn docs" in b"".join(client.get("/docs/").streaming_content)
    for url in ["/docs/concepts/lessons/", "/docs/concepts/lessons"]:
        response = client.get(url)
        assert response.status_code == 200, url
        assert b"Lessons" in b"".join(response.streaming_content)


def test_it_answers_404_for_a_missing_page_and_never_leaves_the_site(client, site):
    assert client.get("/docs/nope/").status_code == 404
    assert client.get("/docs/../cairn/settings.py").status_code in (400, 404)


def test_it_says_how_to_build_the_site_when_it_is_not_built(client, tmp_path, monkeypatch):
    monkeypatch.setattr(docs_site, "SITE_DIR", tmp_path / "absent")
    response = client.get("/docs/")
    assert response.status_code == 404
    assert b"make docs" in response.content
