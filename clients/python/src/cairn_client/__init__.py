"""Cairn's Python client (import name ``cairn_client``, so it never collides with the
server's ``cairn`` package)."""

from cairn_client.client import AsyncCairn, Cairn, CairnError
from cairn_client.operations import OPERATIONS
from cairn_client.project import project_fields

__all__ = ["OPERATIONS", "AsyncCairn", "Cairn", "CairnError", "project_fields"]
