"""Changing the embedder re-embeds through a job instead of mixing vector spaces."""

import pytest

from memory.backfill import embed_backfill_pending, embed_backfill_run
from memory.core.embeddings import get_embedder
from memory.models import JobRun, Knowledge
from memory.tasks import embed_backfill

pytestmark = pytest.mark.django_db


def _remember(api, content):
    response = api.post(
        "/api/v1/knowledge/", {"content": content, "category": "fact"}, format="json"
    )
    assert response.status_code == 201, response.content
    return Knowledge.objects.get(pk=response.json()["id"])


def _as_if_an_old_model_wrote(item):
    # An orthogonal-ish vector stamped with another model's id.
    Knowledge.objects.filter(pk=item.pk).update(
        embedding=[1.0] + [0.0] * 383, embedding_model="old-model-v0"
    )


def test_recall_ignores_vectors_from_another_model_until_backfilled(api):
    item = _remember(api, "The blue-green deploy switch lives in the ops runbook.")
    _as_if_an_old_model_wrote(item)
    _remember(api, "Lunch orders close at eleven.")

    def vector_rank():
        hits = api.post(
            "/api/v1/recall/",
            {"query": "where is the deployment toggle documented?", "top_k": 5},
            format="json",
        ).json()["results"]
        return next((h["vector_rank"] for h in hits if h["id"] == item.pk), None)

    assert vector_rank() is None
    assert embed_backfill_pending()["knowledge"] == 1
    counts = embed_backfill_run(batch_size=1)
    assert counts["knowledge"] == 1
    item.refresh_from_db()
    assert item.embedding_model == get_embedder().model_id
    assert embed_backfill_pending()["knowledge"] == 0
    assert vector_rank() == 1
    # Running it again changes nothing.
    assert embed_backfill_run()["knowledge"] == 0


def test_rows_without_a_vector_are_embedded_and_client_vectors_are_kept(api):
    missing = _remember(api, "Backups run nightly at 02:00 UTC.")
    Knowledge.objects.filter(pk=missing.pk).update(embedding=None, embedding_model="")
    client_vec = [0.0] * 383 + [1.0]
    response = api.post(
        "/api/v1/knowledge/",
        {
            "content": "Client-embedded note about caches.",
            "category": "note",
            "embedding": client_vec,
        },
        format="json",
    )
    assert response.status_code == 201, response.content
    embed_backfill_run()
    missing.refresh_from_db()
    assert missing.embedding is not None
    client = Knowledge.objects.get(pk=response.json()["id"])
    assert client.embedding_model == "client"
    assert list(client.embedding) == pytest.approx(client_vec)


@pytest.mark.django_db(transaction=True)
def test_the_backfill_job_runs_on_a_real_worker_with_progress(api, celery_worker_process):
    for content in (
        "The build farm has twelve ARM runners.",
        "Nightly builds publish to the internal mirror.",
        "Release candidates are tagged by the on-call engineer.",
    ):
        _as_if_an_old_model_wrote(_remember(api, content))
    run_id = embed_backfill.delay().get(timeout=60)
    run = JobRun.objects.get(pk=run_id)
    assert run.status == JobRun.Status.SUCCEEDED
    assert run.counts["knowledge"] == 3
    assert (run.progress_done, run.progress_total) == (3, 3)
    assert not Knowledge.objects.exclude(embedding_model=get_embedder().model_id).exists()
