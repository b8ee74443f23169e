"""Project names people gave to digests (the UI shows a short digest otherwise)."""

from __future__ import annotations
