"""Django settings for OrbChat. Everything that varies comes from the environment (orbchat.env)."""

from __future__ import annotations

from pathlib import Path

import dj_database_url

from orbchat import env

env.apply_offline_defaults()

BASE_DIR = env.BASE_DIR
DATA_DIR = env.data_dir()

SECRET_KEY = env.secret_key()
DEBUG = env.get_bool("DEBUG")
ALLOWED_HOSTS = [h.strip() for h in env.get("ALLOWED_HOSTS", "127.0.0.1,localhost").split(",") if h]
CSRF_TRUSTED_ORIGINS = [o.strip() for o in env.get("CSRF_TRUSTED_ORIGINS").split(",") if o.strip()]
CSRF_FAILURE_VIEW = "orbchat.views.csrf_failure"  # a refused form gets the site's 403 page

INSTALLED_APPS = [
    "daphne",
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "whitenoise.runserver_nostatic",
    "django.contrib.staticfiles",
    "channels",
    "django_htmx",
    "ninja",  # the API docs page's scripts come from our static files, not a CDN
    "orbchat.accounts",
    "orbchat.library",
    "orbchat.connections",
    "rooms",
    "memory",
    "corpus",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "orbchat.headers.ContentSecurityPolicyMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "orbchat.accounts.middleware.FirstRunSetupMiddleware",
    "django.contrib.auth.middleware.LoginRequiredMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
]

ROOT_URLCONF = "orbchat.urls"
ASGI_APPLICATION = "orbchat.asgi.application"

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
            ],
        },
    },
]

# A connection per use (CONN_MAX_AGE 0): under ASGI each HTTP request runs on a thread of its
# own, and a connection kept open there would outlive the thread. PostgreSQL connections come
# from a pool instead of a new server process each time (DATABASE_POOL_SIZE, 0 for none).
DATABASES = {
    "default": dj_database_url.parse(
        env.get("DATABASE_URL", f"sqlite:///{DATA_DIR / 'db.sqlite3'}"),
        conn_max_age=0,
        conn_health_checks=True,  # the pool checks a connection before handing it out
    )
}
DATABASE_POOL_SIZE = env.get_int("DATABASE_POOL_SIZE", 10)
if DATABASES["default"]["ENGINE"] == "django.db.backends.postgresql" and DATABASE_POOL_SIZE > 0:
    DATABASES["default"].setdefault("OPTIONS", {})["pool"] = {
        "min_size": 1,
        "max_size": DATABASE_POOL_SIZE,
        # Seconds to wait for a connection before the request fails: also how long a request
        # takes to report that the database is down.
        "timeout": 5,
    }
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # A file, not memory, so the Celery worker and the browser-test server see the test data;
    # WAL and a busy timeout let web and worker write side by side.
    DATABASES["default"]["TEST"] = {"NAME": str(DATA_DIR / "test-db.sqlite3")}
    DATABASES["default"]["OPTIONS"] = {
        "timeout": 20,
        "transaction_mode": "IMMEDIATE",
        "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
    }

AUTH_USER_MODEL = "accounts.User"
LOGIN_URL = "accounts:login"
LOGIN_REDIRECT_URL = "home"
LOGOUT_REDIRECT_URL = "accounts:login"
AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]

# Failed sign-ins allowed for one username (and from one address) before each further failure locks
# it out for 1, 2, 4… seconds, up to LOGIN_MAX_DELAY_SECONDS (see orbchat.accounts.throttle).
LOGIN_FAILURES_BEFORE_DELAY = env.get_int("LOGIN_FAILURES_BEFORE_DELAY", 5)
LOGIN_ADDRESS_FAILURES_BEFORE_DELAY = env.get_int("LOGIN_ADDRESS_FAILURES_BEFORE_DELAY", 20)
LOGIN_MAX_DELAY_SECONDS = env.get_int("LOGIN_MAX_DELAY_SECONDS", 900)

LANGUAGE_CODE = "en-us"
TIME_ZONE = env.get("TIME_ZONE", "UTC")
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = DATA_DIR / "static"
MEDIA_URL = "media/"
MEDIA_ROOT = DATA_DIR / "media"
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "whitenoise.storage.CompressedManifestStaticFilesStorage"},
}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# Security headers on every response (the Content-Security-Policy comes from orbchat.headers).
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"
SECURE_CROSS_ORIGIN_OPENER_POLICY = "same-origin"
X_FRAME_OPTIONS = "DENY"

SESSION_COOKIE_HTTPONLY = True
SESSION_COOKIE_SECURE = env.get_bool("SECURE_COOKIES")
CSRF_COOKIE_SECURE = SESSION_COOKIE_SECURE

# Largest upload (cards, world books, presets, chats) in megabytes.
MAX_UPLOAD_MB = env.get_int("MAX_UPLOAD_MB", 20)
DATA_UPLOAD_MAX_MEMORY_SIZE = MAX_UPLOAD_MB * 1024 * 1024
FILE_UPLOAD_MAX_MEMORY_SIZE = 5 * 1024 * 1024
# Longest message or edit, in characters: every member's page carries every message.
MAX_MESSAGE_CHARS = env.get_int("MAX_MESSAGE_CHARS", 100_000)
# Largest image (avatars, card images) in pixels, checked before the image is decoded.
MAX_IMAGE_PIXELS = env.get_int("MAX_IMAGE_PIXELS", 16_000_000)

# --- Outbound calls (docs/security.md) -------------------------------------------------------
# Which addresses a user's connection may reach: "auto" (open while there is one account,
# public-only from the second), "open" or "public-only". Administrators are never limited.
OUTBOUND_POLICY = env.get("OUTBOUND_POLICY", "auto").strip().lower()
if OUTBOUND_POLICY not in ("auto", "open", "public-only"):
    raise ValueError(f"OUTBOUND_POLICY must be auto, open or public-only, got {OUTBOUND_POLICY!r}")
# Private addresses every user may call anyway, e.g. "127.0.0.1:5001,10.0.0.0/8" (local model servers).
OUTBOUND_ALLOW = env.get("OUTBOUND_ALLOW")
# The folder under which administrators may point the Rerank role at a local CrossEncoder.
LOCAL_MODELS_DIR = Path(env.get("LOCAL_MODELS_DIR", str(DATA_DIR / "models"))).resolve()
# How the built-in embedding model runs: "onnx", "onnx-int8" or "torch" (docs/configuration.md).
EMBEDDER_BACKEND = env.get("EMBEDDER_BACKEND", "onnx").strip().lower()
if EMBEDDER_BACKEND not in ("onnx", "onnx-int8", "torch"):
    raise ValueError(f"EMBEDDER_BACKEND must be onnx, onnx-int8 or torch, got {EMBEDDER_BACKEND!r}")
# Where the ONNX export of the built-in embedding model is written and read.
EMBEDDER_DIR = Path(env.get("EMBEDDER_DIR", str(DATA_DIR / "embedder"))).resolve()

# --- Services -------------------------------------------------------------------------------
REDIS_URL = env.redis_url()
CHROMA_URL = env.chroma_url()

CHANNEL_LAYERS = {
    "default": {
        "BACKEND": "channels_redis.core.RedisChannelLayer",
        # redis-py 8 times reads out after 5 s by default, exactly channels_redis's BZPOPMIN
        # wait: an idle socket would then fail at random. Reads get a longer allowance.
        "CONFIG": {"hosts": [{"address": REDIS_URL, "socket_timeout": 30}], "prefix": "orbchat"},
    }
}

# Seconds a room socket counts as online after its last sign of life (it renews every third of
# this): a web process that dies without closing its sockets leaves no one online for longer.
PRESENCE_TTL = env.get_int("PRESENCE_TTL", 60)

CELERY_BROKER_URL = env.celery_broker_url(REDIS_URL)
CELERY_RESULT_BACKEND = None
CELERY_TASK_DEFAULT_QUEUE = "default"
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
CELERY_WORKER_HIJACK_ROOT_LOGGER = False
# Seconds a room's memory lock outlives its holder's last sign of life.
MEMORY_LOCK_TTL = env.get_int("MEMORY_LOCK_TTL", 120)
# Seconds before each retry of memory work after a 429/5xx from the Utility model.
MEMORY_RETRY_BACKOFF = [
    float(x) for x in env.get("MEMORY_RETRY_BACKOFF", "5,20,60,180").split(",") if x.strip()
]

# Seconds /healthz waits for its checks (they run at once); a part still silent is "timed out".
HEALTH_CHECK_TIMEOUT = 2.0
# Seconds the worker check waits for the broker, where a live worker keeps its heartbeat.
HEALTH_WORKER_TIMEOUT = 1.0

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "root": {"handlers": ["console"], "level": env.get("LOG_LEVEL", "INFO")},
    "loggers": {
        # chromadb's client logs every heartbeat; litellm is chatty at INFO.
        "chromadb": {"level": "WARNING"},
        "httpx": {"level": "WARNING"},
        "LiteLLM": {"level": "WARNING"},
    },
}
