"""POST /api/v1/recall/: hybrid search of the knowledge store."""

import pytest

from tests.factories.knowledge import KnowledgeFactory

pytestmark = pytest.mark.django_db


def _error(response):
    body = response.json()
    assert set(body) == {"error"}
    return body["error"]


def test_recall_answers_ranked_results_with_ranks_and_scores(api):
    ws = api.agent.workspace
    item = KnowledgeFactory(workspace=ws, content="Sarah prefers morning meetings")
    KnowledgeFactory(workspace=ws, content="The build uses Bazel")
    response = api.post(
        "/api/v1/recall/", {"query": "when does Sarah like meetings"}, format="json"
    )
    assert response.status_code == 200
    body = response.json()
    assert body["top_k"] == 3  # short, simple query
    top = body["results"][0]
    assert top["id"] == item.pk
    assert {"vector_rank", "text_rank", "score", "relevance", "confidence"} <= set(top)
    assert top["score"] == pytest.approx(top["relevance"] + 0.05 * top["confidence"])


def test_recall_uses_top_k_and_filters(api):
    ws = api.agent.workspace
    for i in range(6):
        KnowledgeFactory(workspace=ws, content=f"Deploy note {i}", context="work")
    KnowledgeFactory(workspace=ws, content="Deploy note home", context="home")
    body = api.post(
        "/api/v1/recall/", {"query": "deploy", "context": "work", "top_k": 4}, format="json"
    ).json()
    assert body["top_k"] == 4 and len(body["results"]) == 4
    assert {r["context"] for r in body["results"]} == {"work"}


def test_recall_counts_use_but_leaves_confidence(api):
    item = KnowledgeFactory(
        workspace=api.agent.workspace, content="VPN is WireGuard", confidence=0.6
    )
    api.post("/api/v1/recall/", {"query": "which VPN"}, format="json")
    item.refresh_from_db()
    assert (item.use_count, item.confidence) == (1, 0.6)


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({}, "query"),
        ({"query": ""}, "query"),
        ({"query": "x", "top_k": 0}, "top_k"),
        ({"query": "x", "top_k": 51}, "top_k"),
        ({"query": "x", "time_from": "yesterday"}, "time_from"),
        ({"query": "x", "embedding": [1.0]}, "embedding"),
        ({"query": "x", "category": "nope"}, "category"),
        ({"query": "x", "unknown": 1}, "unknown"),
    ],
)
def test_recall_validation_errors_are_400s(api, body, field):
    response = api.post("/api/v1/recall/", body, format="json")
    assert response.status_code == 400
    assert field in _error(response)["fields"]


def test_recall_accepts_a_client_query_vector(api):
    item = KnowledgeFactory(workspace=api.agent.workspace, content="anything")
    response = api.post(
        "/api/v1/recall/",
        {"query": "unrelated words", "embedding": list(item.embedding)},
        format="json",
    )
    assert response.status_code == 200
    assert response.json()["results"][0]["vector_rank"] == 1


@pytest.mark.django_db(transaction=True)
def test_many_concurrent_recalls_on_overlapping_items_never_fail(live_server, api):
    """Recalls and batch writes that touch the same rows in different orders: no 5xx."""
    import threading
    from concurrent.futures import ThreadPoolExecutor

    import httpx

    ws = api.agent.workspace
    words = ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot"]
    for i in range(24):
        KnowledgeFactory(
            workspace=ws, content=f"{words[i % 6]} {words[(i + 1) % 6]} note {i} on the rollout"
        )
    queries = [f"{words[i % 6]} {words[(i + 3) % 6]} rollout" for i in range(6)]
    token = api.raw_token
    barrier = threading.Barrier(16)

    def run(n):
        headers = {"Authorization": f"Bearer {token}"}
        codes = []
        with httpx.Client(base_url=live_server.url, headers=headers, timeout=120) as client:
            barrier.wait()
            for j in range(8):
                if n % 4 == 3:  # a writer restating items (dedup merges lock rows)
                    items = [
                        {
                            "content": f"{words[(n + j + k) % 6]} {words[(n + j + k + 1) % 6]} "
                            f"note {(n + j + k) % 24} on the rollout"
                        }
                        for k in range(6)
                    ][:: 1 if j % 2 else -1]
                    r = client.post("/api/v1/knowledge/batch/", json={"items": items})
                else:
                    r = client.post(
                        "/api/v1/recall/", json={"query": queries[(n + j) % 6], "top_k": 10}
                    )
                codes.append((r.status_code, r.text[:200]))
        return codes

    with ThreadPoolExecutor(max_workers=16) as pool:
        results = [c for codes in pool.map(run, range(16)) for c in codes]
    failures = [c for c in results if c[0] >= 500]
    assert not failures, failures[:3]
    assert all(c[0] in (200, 201) for c in results), {c[0] for c in results}
