"""Beat's schedule read against job runs: every entry names the kind it records."""

import re
from pathlib import Path

import memory.tasks
from memory.core.schedule import UNRECORDED_TASKS, task_kind


def _recorded_kinds() -> set[str]:
    source = Path(memory.tasks.__file__).read_text()
    return set(re.findall(r'kind="([\w.]+)"', source))


def test_every_beat_task_maps_to_a_kind_its_task_records():
    # The production schedule, not the test settings' empty one.
    from cairn import settings as production

    recorded = _recorded_kinds()
    assert {"heartbeat", "decay", "skills.budget"} <= recorded
    for name, entry in production.CELERY_BEAT_SCHEDULE.items():
        kind = task_kind(entry["task"])
        if entry["task"] in UNRECORDED_TASKS:
            assert kind == ""
        else:
            assert kind in recorded, f"beat entry {name}: no task records kind {kind!r}"


def test_unrecorded_tasks_really_record_no_run():
    source = Path(memory.tasks.__file__).read_text()
    for task in UNRECORDED_TASKS:
        body = source.split(f'@shared_task(name="{task}")')[1].split("@shared_task")[0]
        assert "job_recorded" not in body and "_counted_run" not in body
