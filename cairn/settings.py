"""Django's settings, read from the environment (the docs' configuration reference lists
every variable); Cairn's own constants are in cairn/tuning.py.

With no ``DATABASE_URL`` / ``REDIS_URL`` the embedded PostgreSQL and Valkey are
started (or found running) under ``var/``; with them set, nothing is started.
"""

import os
from pathlib import Path

import dj_database_url

from cairn import embedded
from cairn.env import envbool, envfloat, envint, envstr

BASE_DIR = Path(__file__).resolve().parent.parent


def _secret_key() -> str:
    """SECRET_KEY from the environment, else one generated once and kept in var/."""
    if os.environ.get("SECRET_KEY"):
        return os.environ["SECRET_KEY"]
    key_file = embedded.var_dir() / "secret_key"
    if not key_file.exists():
        import secrets

        # Created with its mode (never readable by others, not even for a moment) and
        # only if absent: two processes starting at once keep the first one's key.
        try:
            fd = os.open(key_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:
            pass
        else:
            with os.fdopen(fd, "w") as fh:
                fh.write(secrets.token_urlsafe(50))
    return key_file.read_text().strip()


SECRET_KEY = _secret_key()
DEBUG = envbool("DEBUG", False)
ALLOWED_HOSTS = [h.strip() for h in envstr("ALLOWED_HOSTS", "localhost,127.0.0.1,[::1]").split(",")]
CSRF_TRUSTED_ORIGINS = [o for o in envstr("CSRF_TRUSTED_ORIGINS", "").split(",") if o]
PORT = envint("PORT", 8000)
SITE_URL = envstr("SITE_URL", f"http://localhost:{PORT}")

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "whitenoise.runserver_nostatic",
    "django.contrib.staticfiles",
    "django.contrib.postgres",
    "rest_framework",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "django_htmx",
    "template_partials",
    "axes",
    "csp",
    "memory",
    "agents",
    "reviews",
]

MIDDLEWARE = [
    # First: a per-token budget on the endpoints that scan tool output, before any
    # body is read (agents/budget.py).
    "agents.budget.RequestBudgetMiddleware",
    "cairn.guard.InputGuardMiddleware",
    "django.middleware.security.SecurityMiddleware",
    # Before the session and CSRF middleware: it sees the cookies they set.
    "cairn.cookies.SecureCookiesMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    # Django's LoginRequiredMiddleware with the one roles table (memory/identity/roles.py):
    # login by default, each UI route's declared role, undeclared routes refused.
    "reviews.access.RoleMiddleware",
    "cairn.browser.MessageMiddleware",  # Django's, skipped for /api/
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
    "csp.middleware.CSPMiddleware",
    "reviews.session.ExpiredSessionMiddleware",
    # Every review link, form and redirect names its workspace (reviews/links.py).
    "reviews.links.WorkspaceLinksMiddleware",
    "agents.guard.WriteGuardMiddleware",
    "agents.idempotency.IdempotencyMiddleware",
    # Last, as django-axes asks: it turns a locked-out login into its lockout answer.
    "axes.middleware.AxesMiddleware",
]

ROOT_URLCONF = "cairn.urls"
WSGI_APPLICATION = "cairn.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "reviews.context.workspace",
            ],
        },
    }
]

# --- database ----------------------------------------------------------------
if os.environ.get("DATABASE_URL"):
    DATABASES = {"default": dj_database_url.parse(os.environ["DATABASE_URL"], conn_max_age=60)}
    EMBEDDED_DATABASE = False
else:
    DATABASES = {
        "default": {
            "ENGINE": "django.db.backends.postgresql",
            "NAME": embedded.DATABASE_NAME,
            "CONN_MAX_AGE": 60,
            **embedded.ensure_database(),
        }
    }
    EMBEDDED_DATABASE = True
DATABASES["default"]["ENGINE"] = "django.db.backends.postgresql"
DATABASES["default"].setdefault("OPTIONS", {})
DATABASES["default"]["CONN_HEALTH_CHECKS"] = True
# Parameters bound by the server, and a statement run twice on a connection prepared
# there: PostgreSQL plans the hot statements once instead of on every request.
if envbool("CAIRN_DB_PREPARE", True):  # 0: a pooler that cannot keep prepared statements
    DATABASES["default"]["OPTIONS"].update(server_side_binding=True, prepare_threshold=2)
# Test runs and their worker processes point at the test database by name.
if os.environ.get("CAIRN_DATABASE_NAME"):
    DATABASES["default"]["NAME"] = os.environ["CAIRN_DATABASE_NAME"]
# A streaming read replica (cairn/db_router.py): recall and the UI's lists read there.
if os.environ.get("REPLICA_DATABASE_URL") or embedded.replica_wanted():
    DATABASES["replica"] = {
        **DATABASES["default"],
        "OPTIONS": {**DATABASES["default"]["OPTIONS"], "connect_timeout": 2},
        "TEST": {"MIRROR": "default"},
        **(
            dj_database_url.parse(os.environ["REPLICA_DATABASE_URL"], conn_max_age=60)
            if os.environ.get("REPLICA_DATABASE_URL")
            else embedded.ensure_replica(DATABASES["default"])
        ),
    }
    DATABASES["replica"]["OPTIONS"] = {
        **DATABASES["default"]["OPTIONS"],
        **DATABASES["replica"].get("OPTIONS", {}),
        "connect_timeout": 2,
    }
DATABASE_ROUTERS = ["cairn.db_router.ReplicaRouter"]
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# --- broker, result backend, cache ------------------------------------------
if os.environ.get("REDIS_URL"):
    REDIS_BASE_URL = os.environ["REDIS_URL"].rstrip("/")
    EMBEDDED_BROKER = False
else:
    REDIS_BASE_URL = embedded.ensure_broker()
    EMBEDDED_BROKER = True
# An explicit db index in REDIS_URL wins; otherwise CAIRN_REDIS_DB (tests use their own).
_has_db_index = REDIS_BASE_URL.rsplit("/", 1)[-1].isdigit() and REDIS_BASE_URL.count("/") > 2
REDIS_URL = REDIS_BASE_URL if _has_db_index else f"{REDIS_BASE_URL}/{envint('CAIRN_REDIS_DB', 0)}"

# Short socket timeouts everywhere Valkey is used: when it is down, requests fail
# fast (503 with Retry-After, or served without the cache) instead of hanging.
CACHES = {
    "default": {
        "BACKEND": "django.core.cache.backends.redis.RedisCache",
        "LOCATION": REDIS_URL,
        "KEY_PREFIX": "cairn",
        "OPTIONS": {"socket_connect_timeout": 1, "socket_timeout": 2},
    }
}

CELERY_BROKER_URL = REDIS_URL
CELERY_RESULT_BACKEND = REDIS_URL
CELERY_TASK_SERIALIZER = "json"
CELERY_ACCEPT_CONTENT = ["json"]
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
CELERY_BROKER_CONNECTION_TIMEOUT = 2
# Publishing (POST /exports/, /erasures/) gives up after ~1 s when the broker is
# down; the run is marked failed and the API answers 503 (memory.core.jobs).
CELERY_TASK_PUBLISH_RETRY_POLICY = {
    "max_retries": 2,
    "interval_start": 0,
    "interval_step": 0.3,
    "interval_max": 0.5,
}
# A task is acknowledged after it finishes (acks_late above); a message whose
# worker died is redelivered after visibility_timeout. It must exceed the longest
# job (a large erasure); the reaper (memory.tasks.jobs_reap) resumes runs sooner.
CELERY_BROKER_TRANSPORT_OPTIONS = {
    "socket_connect_timeout": 2,
    "socket_timeout": 5,
    "visibility_timeout": envint("CAIRN_BROKER_VISIBILITY_TIMEOUT_S", 6 * 3600),
}
CELERY_RESULT_EXPIRES = 3600
CELERY_REDIS_SOCKET_CONNECT_TIMEOUT = 2
CELERY_REDIS_SOCKET_TIMEOUT = 5
CELERY_RESULT_BACKEND_TRANSPORT_OPTIONS = {
    "retry_policy": {
        "max_retries": 2,
        "interval_start": 0,
        "interval_step": 0.3,
        "interval_max": 0.5,
    }
}
CELERY_TIMEZONE = "UTC"
CELERY_BEAT_SCHEDULE_FILENAME = str(embedded.var_dir() / "celerybeat-schedule")
CELERY_BEAT_SCHEDULE = {
    "heartbeat": {"task": "memory.tasks.heartbeat", "schedule": envint("CAIRN_HEARTBEAT_S", 300)},
}
# Each worker also sends one heartbeat the moment it is ready (cairn/celery.py), so
# Job runs shows a live stack within seconds instead of after the first beat.
CAIRN_HEARTBEAT_ON_START = envbool("CAIRN_HEARTBEAT_ON_START", True)

# --- auth, i18n, static ------------------------------------------------------
AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
]
# Login throttling (django-axes): after AXES_FAILURE_LIMIT wrong passwords for one
# username from one address, that pair is locked out for AXES_COOLOFF_TIME hours,
# even with the right password; a success resets the count.
AUTHENTICATION_BACKENDS = [
    "axes.backends.AxesStandaloneBackend",
    "django.contrib.auth.backends.ModelBackend",
]
AXES_FAILURE_LIMIT = envint("CAIRN_LOGIN_FAILURE_LIMIT", 5)
AXES_COOLOFF_TIME = envfloat("CAIRN_LOGIN_COOLOFF_HOURS", 0.25)
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
AXES_RESET_ON_SUCCESS = True
AXES_LOCKOUT_TEMPLATE = "registration/locked_out.html"
AXES_VERBOSE = False

# Content-Security-Policy (django-csp): scripts only from our own static files (no
# inline script, no eval); styles from our files plus the inline width of the
# confidence bars. The Swagger UI page ships inline scripts, so it is left out.
CONTENT_SECURITY_POLICY = {
    "EXCLUDE_URL_PREFIXES": ["/api/v1/docs/"],
    "DIRECTIVES": {
        "default-src": ["'self'"],
        "script-src": ["'self'"],
        "style-src": ["'self'", "'unsafe-inline'"],
        "img-src": ["'self'", "data:"],
        "connect-src": ["'self'"],
        "font-src": ["'self'"],
        "object-src": ["'none'"],
        "base-uri": ["'self'"],
        "form-action": ["'self'"],
        "frame-ancestors": ["'none'"],
    },
}

LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "reviews:dashboard"
LOGOUT_REDIRECT_URL = "login"
SESSION_COOKIE_HTTPONLY = True
# Secure cookies (docs/operating/hardening.md): always when SITE_URL is https://
# (or SESSION_/CSRF_COOKIE_SECURE say so); and per response whenever the request
# came over HTTPS (cairn.cookies). Behind a proxy that ends TLS, set
# CAIRN_BEHIND_HTTPS_PROXY=true so its X-Forwarded-Proto counts; only where the
# proxy sets that header itself (a client could send it otherwise).
SESSION_COOKIE_SECURE = envbool("SESSION_COOKIE_SECURE", SITE_URL.startswith("https://"))
CSRF_COOKIE_SECURE = envbool("CSRF_COOKIE_SECURE", SITE_URL.startswith("https://"))
SECURE_PROXY_SSL_HEADER = (
    ("HTTP_X_FORWARDED_PROTO", "https") if envbool("CAIRN_BEHIND_HTTPS_PROXY", False) else None
)
CSRF_FAILURE_VIEW = "reviews.session.csrf_failure"
CSRF_COOKIE_HTTPONLY = False  # htmx reads the token from the page, not the cookie
SECURE_CONTENT_TYPE_NOSNIFF = True
X_FRAME_OPTIONS = "DENY"

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = False
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = embedded.var_dir() / "static"
STATICFILES_DIRS = [BASE_DIR / "static"]
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "whitenoise.storage.CompressedManifestStaticFilesStorage"},
}
MEDIA_ROOT = embedded.var_dir() / "media"

# --- API -----------------------------------------------------------------------
REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": ["agents.auth.BearerTokenAuthentication"],
    "DEFAULT_PERMISSION_CLASSES": ["agents.auth.ScopeFromTable"],
    "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer"],
    "DEFAULT_PARSER_CLASSES": ["rest_framework.parsers.JSONParser"],
    "EXCEPTION_HANDLER": "cairn.errors.api_exception_handler",
    "DEFAULT_SCHEMA_CLASS": "cairn.schema.BoundedAutoSchema",
    "UNAUTHENTICATED_USER": None,
}
SPECTACULAR_SETTINGS = {
    "TITLE": "Cairn agent API",
    "DESCRIPTION": "Memory for AI agents that learns only from outside evidence. "
    "Authenticate with `Authorization: Bearer <token>`.",
    "VERSION": "1.0.0",
    "SERVE_INCLUDE_SCHEMA": False,
    "SERVE_PERMISSIONS": ["rest_framework.permissions.AllowAny"],
    "SERVE_AUTHENTICATION": [],
    "COMPONENT_SPLIT_REQUEST": True,
    # Swagger UI served from our own static files: no CDN, works offline.
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    "POSTPROCESSING_HOOKS": [
        "drf_spectacular.hooks.postprocess_schema_enums",
        "cairn.schema.add_idempotency_header",
        "cairn.schema.add_incognito",
    ],
    # One-value enums that tell recall's hits apart (kind, and a turn's source).
    "ENUM_NAME_OVERRIDES": {"HitKnowledgeEnum": ["knowledge"], "HitTurnEnum": ["turn"]},
}

# --- Cairn constants (named as in SPEC; defaults are the spec's): cairn/tuning.py ----
from cairn.tuning import *  # noqa: E402,F403
from cairn.tuning import BEAT_SCHEDULE  # noqa: E402

CELERY_BEAT_SCHEDULE.update(BEAT_SCHEDULE)
