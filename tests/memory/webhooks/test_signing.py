"""Signing: the secret is derived (never stored), the signature covers the timestamp,
and the webhooks guide's few lines of Python verify what Cairn sends."""

import re
import time
from pathlib import Path

from memory.webhooks.signing import signature_header, signature_verify, webhook_secret

GUIDE = Path(__file__).resolve().parents[3] / "docs" / "guides" / "webhooks.md"
BODY = b'{"event":"ping"}'


def test_the_secret_depends_on_the_key_the_webhook_and_its_salt(settings):
    one = webhook_secret(webhook_id=1, salt="a")
    assert one == webhook_secret(webhook_id=1, salt="a") and one.startswith("whsec_")
    assert one != webhook_secret(webhook_id=2, salt="a")
    assert one != webhook_secret(webhook_id=1, salt="b")  # rotating draws a new salt
    settings.SECRET_KEY = "another server key, another secret"
    assert one != webhook_secret(webhook_id=1, salt="a")


def test_a_signature_binds_body_and_timestamp():
    header = signature_header(secret="whsec_x", body=BODY)
    assert re.fullmatch(r"t=\d+,v1=[0-9a-f]{64}", header)
    assert signature_verify(secret="whsec_x", body=BODY, header=header)
    assert not signature_verify(secret="whsec_y", body=BODY, header=header)
    assert not signature_verify(secret="whsec_x", body=BODY + b" ", header=header)
    t, v1 = header.split(",")
    moved = f"t={int(t[2:]) + 1},{v1}"  # a replay with a newer timestamp
    assert not signature_verify(secret="whsec_x", body=BODY, header=moved)
    old = signature_header(secret="whsec_x", body=BODY, timestamp=int(time.time()) - 3600)
    assert not signature_verify(secret="whsec_x", body=BODY, header=old)
    assert not signature_verify(secret="whsec_x", body=BODY, header="garbage")


def test_the_guides_snippet_verifies_a_delivery():
    block = re.search(r"```python\n(import hashlib, hmac, time\n.*?)```", GUIDE.read_text(), re.S)
    assert block, f"no verification snippet in {GUIDE}"
    namespace: dict = {}
    exec(block.group(1), namespace)  # noqa: S102 — our own docs
    header = signature_header(secret="whsec_x", body=BODY)
    assert namespace["verified"]("whsec_x", BODY, header)
    assert not namespace["verified"]("whsec_y", BODY, header)
