"""Situations (SPEC section 5): when an agent hits a wall it cannot fix, it stops,
asks, and remembers. Classify (what happened), recovery (what the turn allows
next), lessons (what the next session on this machine starts from)."""
