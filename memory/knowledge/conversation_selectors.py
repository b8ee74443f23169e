"""Reading conversations and tool calls: search past turns, per-tool success rates."""

from __future__ import annotations
