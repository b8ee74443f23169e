"""An export whose partial file an erasure in the same workspace deletes ends in a
clean failed state: a sentence in the job's error, no traceback or server paths."""

import threading
import time

import pytest

from memory.core.jobs import job_run_create
from memory.models import JobRun, Knowledge
from memory.privacy.exports import export_dir, export_files_forget
from memory.tasks import export_run
from tests.factories.identity import WorkspaceFactory


@pytest.mark.django_db(transaction=True)
def test_an_export_whose_file_an_erasure_deleted_fails_cleanly(settings):
    settings.CAIRN_EXPORT_CHUNK = 5  # many small reads: the file is open for a while
    workspace = WorkspaceFactory()
    Knowledge.objects.bulk_create(
        (
            Knowledge(workspace=workspace, content=f"row {i} " + "x" * 200, context="c")
            for i in range(4000)
        ),
        batch_size=500,
    )
    run = job_run_create(
        kind="export",
        workspace=workspace,
        params={"selector": {"kind": "workspace", "value": workspace.name}, "format": "jsonl"},
    )
    raised: list[BaseException] = []

    def work():
        try:
            export_run(run.pk)
        except BaseException as exc:  # noqa: BLE001 — inspected below
            raised.append(exc)

    thread = threading.Thread(target=work)
    thread.start()
    directory = export_dir(workspace)
    deadline = time.monotonic() + 60
    while not list(directory.glob("*.part")) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert list(directory.glob("*.part")), "the export started writing"
    # What an erasure of this workspace does to its export files, mid-write.
    assert export_files_forget(workspace=workspace, erasure=None) >= 1
    thread.join(timeout=120)

    run.refresh_from_db()
    assert run.status == JobRun.Status.FAILED
    assert run.error.startswith("The export file was deleted while it was being written")
    for leak in ("Traceback", str(settings.MEDIA_ROOT), "/", ".py"):
        assert leak not in run.error, leak
    assert raised and getattr(raised[0], "code", "") == "export_removed"
    assert list(directory.iterdir()) == []  # nothing half-written is left behind
