"""Test settings: the same real services, a separate broker db and fast hashing."""

import os

os.environ.setdefault("CAIRN_REDIS_DB", "1")

from cairn.settings import *  # noqa: E402,F403
from cairn.settings import STATIC_ROOT  # noqa: E402

PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
}
CELERY_BEAT_SCHEDULE = {}
# Tests serve static files through the finders; an empty STATIC_ROOT keeps
# whitenoise from warning on every request in a fresh clone.
STATIC_ROOT.mkdir(parents=True, exist_ok=True)
