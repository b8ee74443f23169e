"""Memory that tends itself (SPEC section 7): reconcile, consolidate and merge jobs.

Sits above lessons and the review queue: its jobs write through the knowledge
and lesson services, lower confidence only through the ledger
(``confidence_apply`` with cause ``reconcile``) and hand what a machine must
not decide to people with ``review_item_open``.
"""
