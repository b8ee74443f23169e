"""manage.py import_conversations: JSONL sessions through the batch turn path."""

import io
import json

import pytest
from django.core.management import CommandError, call_command

from memory.models import ConversationTurn

pytestmark = pytest.mark.django_db


def _write(tmp_path, sessions):
    path = tmp_path / "history.jsonl"
    path.write_text("\n".join(json.dumps(s) for s in sessions) + "\n")
    return str(path)


def _session(sid, n, word="garden"):
    return {
        "session_id": sid,
        "context": "personal",
        "turns": [
            {
                "role": "user" if i % 2 == 0 else "assistant",
                "content": f"{word} talk {i}",
                "at": "2023-05-08T13:56:00Z",
            }
            for i in range(n)
        ],
    }


def test_it_imports_sessions_in_batches_and_a_rerun_adds_nothing(tmp_path):
    path = _write(tmp_path, [_session("a", 1200), _session("b", 3)])
    out, err = io.StringIO(), io.StringIO()
    call_command(
        "import_conversations", path, workspace="w", agent="importer", stdout=out, stderr=err
    )
    assert "2 session(s): 1203 new turn(s), 0 already stored" in out.getvalue()
    assert "session" in err.getvalue()  # the progress bar
    assert ConversationTurn.objects.filter(session_id="a").count() == 1200
    turn = ConversationTurn.objects.get(session_id="b", turn_index=2)
    assert (turn.context, turn.created_at.isoformat()[:16]) == ("personal", "2023-05-08T13:56")
    again = io.StringIO()
    call_command(
        "import_conversations",
        path,
        workspace="w",
        agent="importer",
        no_progress=True,
        stdout=again,
    )
    assert "0 new turn(s), 1203 already stored" in again.getvalue()
    assert ConversationTurn.objects.count() == 1203


def test_it_stops_on_a_bad_line_naming_it(tmp_path):
    bad = _session("c", 2)
    bad["turns"][1]["role"] = "narrator"
    path = _write(tmp_path, [_session("a", 2), bad])
    with pytest.raises(CommandError, match=r"line 2: .*turns\[1\]\.role"):
        call_command(
            "import_conversations",
            path,
            workspace="w",
            agent="importer",
            no_progress=True,
            stdout=io.StringIO(),
        )
    assert ConversationTurn.objects.filter(session_id="c").count() == 0
