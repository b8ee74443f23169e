"""Models for skills (see memory/models/__init__.py)."""

__all__: list[str] = []
