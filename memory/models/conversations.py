"""Models for conversations (see memory/models/__init__.py)."""

__all__: list[str] = []
