"""Reads for the outcomes browser: lists per turn, and why a turn passed or not.

``outcome_explain`` re-derives the verdict from the stored approach and checks
with the service's own rule function (``outcome_verdict``), so the words on the
page cannot drift from what the server decided.
"""

from __future__ import annotations
