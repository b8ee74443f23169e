"""Export signatures: an import keeps who-said-what only from a file this
installation (or one its operator trusts) wrote.

An export file is signed with HMAC-SHA256 under a key derived from the server's
``SECRET_KEY``: a JSON Lines export ends with a ``{"type": "signature"}`` line
covering every byte before it; a JSON export ends with a ``"signature"`` member
covering every byte before ``,"signature":``. Another installation's exports are
trusted when its key (``manage.py export_signing_key`` there) is listed in
``CAIRN_IMPORT_TRUSTED_KEYS`` here. Anyone holding a key can sign: give it only to
installations whose exports you would import as your own.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from pathlib import Path

from django.conf import settings

ALGORITHM = "hmac-sha256"
JSON_MARK = b',"signature":'


def export_signing_key() -> str:
    """This installation's export key (hex), derived from SECRET_KEY."""
    return hmac.new(
        settings.SECRET_KEY.encode(), b"cairn-export-signing:v1", hashlib.sha256
    ).hexdigest()


def key_id(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()[:16]


def _trusted_keys() -> dict[str, str]:
    keys = [export_signing_key(), *settings.CAIRN_IMPORT_TRUSTED_KEYS]
    return {key_id(key): key for key in keys if key}


class SigningWriter:
    """A text stream wrapper that signs what passes through it."""

    def __init__(self, out):
        self.out = out
        self.key = export_signing_key()
        self.mac = hmac.new(self.key.encode(), digestmod=hashlib.sha256)

    def write(self, text: str) -> int:
        self.mac.update(text.encode("utf-8"))
        return self.out.write(text)

    def signature(self) -> dict:
        """The signature of everything written so far (write it with ``out`` itself)."""
        return {"alg": ALGORITHM, "key_id": key_id(self.key), "value": self.mac.hexdigest()}


def export_signer(path: Path) -> str:
    """The id of the trusted key that signed the export at ``path``, or "" when it
    is unsigned, signed by a key this installation does not trust, or altered."""
    data = Path(path).read_bytes()
    body = data.rstrip(b"\n")
    if body.startswith(b"{") and b"\n" not in body.rstrip(b"\n"):
        cut = body.rfind(JSON_MARK)
        if cut < 0 or not body.endswith(b"}}"):
            return ""
        signed, tail = body[:cut], body[cut + len(JSON_MARK) : -1]
    else:
        cut = body.rfind(b"\n")
        if cut < 0:
            return ""
        signed, tail = body[: cut + 1], body[cut + 1 :]
    try:
        signature = json.loads(tail)
    except (json.JSONDecodeError, UnicodeDecodeError):
        return ""
    if not isinstance(signature, dict) or signature.get("alg") != ALGORITHM:
        return ""
    key = _trusted_keys().get(str(signature.get("key_id", "")))
    if key is None:
        return ""
    expected = hmac.new(key.encode(), signed, hashlib.sha256).hexdigest()
    return signature["key_id"] if hmac.compare_digest(expected, str(signature.get("value"))) else ""
