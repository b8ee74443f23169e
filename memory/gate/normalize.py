"""One spelling for text that means the same to a shell or a resolver: case, Unicode
compatibility forms and look-alike letters, percent- and base64-encoding.

The gate compares a command's reach with served text only after both went through
:func:`skeleton`, so ``EVIL.example``, ``еvil.example`` (Cyrillic е) and
``%65vil.example`` are one host."""

from __future__ import annotations

import base64
import binascii
import re
import unicodedata
from urllib.parse import unquote

# Letters that NFKC leaves alone but a reader (and a model) takes for Latin ones: the
# Cyrillic and Greek rows of Unicode's confusables table (TR39) that map to one ASCII
# letter. NFKC already folds full-width forms, ligatures and mathematical letters.
_LOOKALIKES = {
    # Cyrillic
    "а": "a",
    "в": "b",
    "с": "c",
    "ԁ": "d",
    "е": "e",
    "һ": "h",
    "і": "i",
    "ј": "j",
    "к": "k",
    "ӏ": "l",
    "м": "m",
    "н": "h",
    "о": "o",
    "р": "p",
    "ԛ": "q",
    "г": "r",
    "ѕ": "s",
    "т": "t",
    "ս": "u",
    "ѵ": "v",
    "ԝ": "w",
    "х": "x",
    "у": "y",
    "ү": "y",
    "ё": "e",
    "ї": "i",
    "ӕ": "ae",
    # Greek
    "α": "a",
    "β": "b",
    "ε": "e",
    "η": "n",
    "ι": "i",
    "κ": "k",
    "ν": "v",
    "ο": "o",
    "ρ": "p",
    "τ": "t",
    "υ": "u",
    "χ": "x",
    "γ": "y",
    "ω": "w",
    # Armenian and others often used in homograph domains
    "օ": "o",
    "ց": "g",
    "ɡ": "g",
    "ı": "i",
    "ℓ": "l",
}
_TRANSLATE = str.maketrans(_LOOKALIKES)
# Zero-width and format characters hide inside words without changing how they look.
_INVISIBLE = dict.fromkeys(cp for cp in (0x200B, 0x200C, 0x200D, 0x2060, 0xFEFF, 0x00AD, 0x180E))


def skeleton(text: str) -> str:
    """Case-folded, NFKC, look-alikes mapped to ASCII, invisible characters dropped,
    percent-encoding undone (to a fixed point, at most three rounds)."""
    out = unicodedata.normalize("NFKC", text).translate(_INVISIBLE).casefold()
    out = out.translate(_TRANSLATE)
    for _ in range(3):
        decoded = unquote(out)
        if decoded == out:
            break
        out = unicodedata.normalize("NFKC", decoded).casefold().translate(_TRANSLATE)
    return out


def base64_text(token: str) -> str | None:
    """The printable text a base64 (or base64url) token decodes to, else None.

    Short tokens are not tried: most 4-8 letter words decode to bytes by chance."""
    token = token.strip().strip("'\"`")
    if len(token) < 8 or len(token) > 20000:
        return None
    if not re.fullmatch(r"[A-Za-z0-9+/_-]+={0,2}", token):
        return None
    body = token.rstrip("=")
    padded = body + "=" * (-len(body) % 4)
    alphabet = b"-_" if ("-" in body or "_" in body) else None
    try:
        raw = base64.b64decode(padded.encode("ascii"), altchars=alphabet, validate=True)
        text = raw.decode("utf-8")
    except (binascii.Error, ValueError):
        return None
    if text and all(ch.isprintable() or ch in "\n\t\r" for ch in text):
        return text
    return None
