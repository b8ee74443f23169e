from memory.models.identity import (
    Agent,
    ApiToken,
    Membership,
    Role,
    TokenScope,
    Workspace,
)
from memory.models.ops import AuditEvent, JobRun

__all__ = [
    "Agent",
    "ApiToken",
    "AuditEvent",
    "JobRun",
    "Membership",
    "Role",
    "TokenScope",
    "Workspace",
]
