"""The built-in judge's rules, and the chat judge against a local OpenAI-compatible server."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from memory.maintenance.judge import ChatJudge, HeuristicJudge, JudgeUnavailable, chat_complete


@pytest.mark.parametrize(
    ("a", "b", "verdict"),
    [
        ("Staging runs PostgreSQL 14", "Staging runs PostgreSQL 16", "contradiction"),
        ("The release is on 2026-05-01", "The release is on 2026-06-01", "contradiction"),
        ("Backups are encrypted", "Backups are not encrypted", "contradiction"),
        ("The on-call engineer is Alice", "The on-call engineer is Bob", "contradiction"),
        ("Deploys go through the pipeline", "deploys go through the pipeline.", "duplicate"),
        ("Release notes are in Markdown", "The release notes are in Markdown", "duplicate"),
        ("Python is used for the API", "The office coffee machine is broken", "neutral"),
        ("The team prefers tabs", "The team prefers spaces for new files", "neutral"),
    ],
)
def test_it_judges_by_the_words_that_differ(a, b, verdict):
    assert HeuristicJudge().judge(a, b).verdict == verdict
    assert HeuristicJudge().judge(b, a).verdict == verdict


class _Model(BaseHTTPRequestHandler):
    answers: list = []
    seen: list = []

    def do_POST(self):  # noqa: N802
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        type(self).seen.append((self.path, self.headers.get("Authorization"), body))
        status, text = type(self).answers.pop(0)
        payload = json.dumps({"choices": [{"message": {"content": text}}]}).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, *args):
        pass


@pytest.fixture
def model(settings):
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Model)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    settings.CAIRN_JUDGE_URL = f"http://127.0.0.1:{server.server_port}/v1"
    settings.CAIRN_JUDGE_MODEL = "tiny"
    settings.CAIRN_JUDGE_API_KEY = "k-test"
    settings.CAIRN_JUDGE_MAX_PER_MINUTE = 6000
    _Model.answers, _Model.seen = [], []
    yield _Model
    server.shutdown()


def test_it_asks_the_chat_model_and_reads_one_word(model):
    model.answers.append((200, "Contradiction."))
    judgement = ChatJudge().judge("a", "b")
    assert (judgement.verdict, judgement.judge) == ("contradiction", "chat:tiny")
    path, auth, body = model.seen[0]
    assert path == "/v1/chat/completions" and auth == "Bearer k-test"
    assert body["model"] == "tiny" and body["messages"][1]["content"] == "A: a\nB: b"


@pytest.mark.parametrize("answer", [(500, "oops"), (200, "maybe?")])
def test_it_never_guesses_when_the_model_fails_or_rambles(model, answer):
    model.answers.append(answer)
    with pytest.raises(JudgeUnavailable):
        ChatJudge().judge("a", "b")


def test_it_gives_up_after_the_timeout(settings):
    settings.CAIRN_JUDGE_URL = "http://10.255.255.1:9/v1"  # unroutable: the timeout answers
    settings.CAIRN_JUDGE_MODEL = "tiny"
    settings.CAIRN_JUDGE_TIMEOUT_S = 0.2
    with pytest.raises(JudgeUnavailable):
        chat_complete(system="s", user="u")
