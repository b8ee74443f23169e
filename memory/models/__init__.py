from memory.models.identity import (
    Agent,
    ApiToken,
    Channel,
    Membership,
    Role,
    TokenScope,
    Workspace,
)
from memory.models.ops import AuditEvent, IdempotencyRecord, JobRun

__all__ = [
    "Agent",
    "ApiToken",
    "Channel",
    "AuditEvent",
    "IdempotencyRecord",
    "JobRun",
    "Membership",
    "Role",
    "TokenScope",
    "Workspace",
]

from memory.models.knowledge import (  # noqa: E402
    CONTENT_MAX_CHARS,
    EMBEDDING_DIMENSIONS,
    PRIVILEGED_CATEGORIES,
    Category,
    Knowledge,
    KnowledgeStatus,
    Source,
)

__all__ += [
    "CONTENT_MAX_CHARS",
    "EMBEDDING_DIMENSIONS",
    "PRIVILEGED_CATEGORIES",
    "Category",
    "Knowledge",
    "KnowledgeStatus",
    "Source",
]

# Each area's models live in their own module and export through __all__.
from memory.models.conversations import *  # noqa: E402,F403
from memory.models.gate import *  # noqa: E402,F403
from memory.models.lessons import *  # noqa: E402,F403
from memory.models.maintenance import *  # noqa: E402,F403
from memory.models.privacy import *  # noqa: E402,F403
from memory.models.review import *  # noqa: E402,F403
from memory.models.situations import *  # noqa: E402,F403
from memory.models.skills import *  # noqa: E402,F403
from memory.models.textstats import *  # noqa: E402,F403
from memory.models.webhooks import *  # noqa: E402,F403
