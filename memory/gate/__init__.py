"""The action gate (SPEC section 4a): what a command reaches, and whether the text that
steered the agent toward it had earned the right to. Pure parts (``normalize``,
``reach``) import nothing from Django; ``decide`` reads the served items once."""
