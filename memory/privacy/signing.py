"""Export signatures: an import keeps who-said-what only from a file this
installation (or one its operator trusts) wrote, and only for the bytes it signed.

An export file is signed with HMAC-SHA256 under a key derived from the server's
``SECRET_KEY``: a JSON Lines export ends with a ``{"type": "signature"}`` trailer
line covering every byte before it; a JSON export ends with a ``"signature"`` member
covering every byte before ``,"signature":``. Another installation's exports are
trusted when its key (``manage.py export_signing_key`` there) is listed in
``CAIRN_IMPORT_TRUSTED_KEYS`` here. Anyone holding a key can sign: give it only to
installations whose exports you would import as your own.

Reading a file (``export_open``) verifies before anything is parsed as a record:

1. The trailer is cut off first, by position (the last line; the last
   ``,"signature":`` member), and parsed apart from the records. A trailer holding any
   key besides the signature's own is refused: it could not be read as a record, and a
   file that tries is not one this server wrote.
2. The HMAC is checked over exactly the bytes before the trailer.
3. Only those bytes are handed on as the body; the records are parsed from it, and a
   signature found among them (a second trailer, a record after the trailer) is
   refused by the parser (``memory.privacy.imports``).

So a signed import holds the bytes a trusted key signed and nothing else; any other
change leaves the file unsigned (its rows arrive as the agent's word) or refused.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from dataclasses import dataclass
from pathlib import Path

from django.conf import settings

from cairn.errors import ApplicationError

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


#: The keys of a signature, in the JSON Lines trailer (``type`` too) and the JSON member.
SIGNATURE_KEYS = frozenset({"alg", "key_id", "value"})
TRAILER_TYPE = "signature"


@dataclass(frozen=True)
class OpenedExport:
    """A file's verified parts: ``body`` holds the records' bytes (the trailer cut off),
    ``signed_by`` the trusted key that signed exactly ``body`` ("" when none did)."""

    kind: str  # "jsonl" or "json"
    body: bytes
    signed_by: str


def _refuse(message: str, *, code: str = "invalid_export") -> ApplicationError:
    return ApplicationError(message + " Nothing was imported.", code=code, fields={"file": [code]})


def _signature_of(raw: bytes, *, extra: frozenset[str] = frozenset()) -> dict | None:
    """The signature object in ``raw``, or None when ``raw`` is not one; refused when it
    is one but carries any key besides the signature's own."""
    try:
        value = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError):
        return None
    if not isinstance(value, dict):
        return None
    if extra and value.get("type") != TRAILER_TYPE:
        return None
    other = set(value) - SIGNATURE_KEYS - extra
    if other:
        raise _refuse(
            "The file's signature carries other keys ("
            + ", ".join(sorted(map(str, other)))[:200]
            + "): a signature holds only alg, key_id and value."
        )
    return value


def _signer(signature: dict | None, signed: bytes) -> str:
    if signature is None or signature.get("alg") != ALGORITHM:
        return ""
    key = _trusted_keys().get(str(signature.get("key_id", "")))
    if key is None:
        return ""
    expected = hmac.new(key.encode(), signed, hashlib.sha256).hexdigest()
    return signature["key_id"] if hmac.compare_digest(expected, str(signature.get("value"))) else ""


def _is_jsonl(data: bytes) -> bool:
    head = data.split(b"\n", 1)[0]
    try:
        first = json.loads(head.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError):
        return False
    return isinstance(first, dict) and first.get("type") == "header"


def export_open(path: Path) -> OpenedExport:
    """Split the file at ``path`` into its body and its signature, and verify the one
    over the other, before any record is read (see the module's docstring)."""
    data = Path(path).read_bytes()
    if not data.startswith(b"{"):
        raise ApplicationError("Not a Cairn export file.", fields={"file": ["invalid"]})
    content = data[:-1] if data.endswith(b"\n") else data
    if _is_jsonl(data):
        cut = content.rfind(b"\n") + 1
        signature = _signature_of(content[cut:], extra=frozenset({"type"}))
        if signature is None:
            return OpenedExport("jsonl", data, "")
        body = content[:cut]
        return OpenedExport("jsonl", body, _signer(signature, body))
    cut = content.rfind(JSON_MARK)
    if cut < 0 or not content.endswith(b"}"):
        return OpenedExport("json", data, "")
    signature = _signature_of(content[cut + len(JSON_MARK) : -1])
    if signature is None:
        return OpenedExport("json", data, "")
    signed = content[:cut]
    return OpenedExport("json", signed + b"}", _signer(signature, signed))


def export_signer(path: Path) -> str:
    """The id of the trusted key that signed the export at ``path``, or "" when it
    is unsigned, signed by a key this installation does not trust, or altered."""
    return export_open(path).signed_by
