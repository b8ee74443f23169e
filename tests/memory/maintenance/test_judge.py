"""The built-in judge's rules, and the chat judge against a local OpenAI-compatible server."""

from __future__ import annotations

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
