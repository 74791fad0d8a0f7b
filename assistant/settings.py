"""Django settings. Everything configurable comes from the environment (see docs/CONFIGURATION.md)."""

from __future__ import annotations

import os
from datetime import timedelta
from pathlib import Path
from typing import Any

BASE_DIR = Path(__file__).resolve().parent.parent


def env_bool(name: str, default: bool) -> bool:
    return os.environ.get(name, str(default)).lower() in {"1", "true", "yes", "on"}


DEBUG = env_bool("DJANGO_DEBUG", True)
ALLOWED_HOSTS = [h for h in os.environ.get("DJANGO_ALLOWED_HOSTS", "127.0.0.1,localhost,testserver").split(",") if h]
LOCAL_HOSTS = frozenset({"127.0.0.1", "localhost", "::1", "[::1]", "testserver"})
# A development key is only acceptable with DEBUG on, on this machine: production must set DJANGO_SECRET_KEY.
# A server that answers other hosts with the public development key would let anyone forge its sessions,
# even when DJANGO_DEBUG was forgotten (it defaults to on for `make run`).
SECRET_KEY = os.environ.get("DJANGO_SECRET_KEY", "")
if not SECRET_KEY:
    if not DEBUG:
        raise RuntimeError("DJANGO_SECRET_KEY must be set when DJANGO_DEBUG is off.")
    if not LOCAL_HOSTS.issuperset(ALLOWED_HOSTS):
        raise RuntimeError(
            "DJANGO_SECRET_KEY must be set when DJANGO_ALLOWED_HOSTS names hosts other than this machine."
        )
    SECRET_KEY = "dev-only-insecure-key-do-not-use-in-production"
CSRF_TRUSTED_ORIGINS = [o for o in os.environ.get("DJANGO_CSRF_TRUSTED_ORIGINS", "").split(",") if o]

INSTALLED_APPS = [
    # Before daphne: its runserver, serving with our Daphne server (assistant/server/server.py).
    "assistant.server",
    "daphne",
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "channels",
    "csp",
    "django_htmx",
    "ninja",  # the API's OpenAPI pages (/v1/docs)
    "assistant.orgs",
    "assistant.knowledge",
    "assistant.connectors",
    "assistant.runs",
    "assistant.chat",
    "assistant.catalogue",
    "assistant.demo",  # the offline demo: its provider, its web and load_demo (registered in its AppConfig.ready)
    "assistant.budgets",
    "django_celery_beat",
    "assistant.workers",
    "assistant.schedules",
    "axes",
]

# Django's and django-csp's middleware, the same classes with their hooks run in the event loop's thread rather
# than a thread each (assistant/orgs/middleware.py): about twenty trips to a thread and back a request fewer.
MIDDLEWARE = [
    # With telemetry: the request's server span named by its route (assistant/telemetry/http.py).
    "assistant.telemetry.http.route",
    "assistant.orgs.middleware.SecurityMiddleware",
    "assistant.orgs.middleware.CSPMiddleware",
    "assistant.orgs.middleware.SessionMiddleware",
    "assistant.orgs.middleware.LocaleMiddleware",
    # Before anything reads a body: one over the limit is refused in the caller's format (413).
    "assistant.api.middleware.request_limits",
    "assistant.orgs.middleware.CommonMiddleware",
    "assistant.orgs.middleware.CsrfViewMiddleware",
    "assistant.orgs.middleware.AuthenticationMiddleware",
    "assistant.orgs.middleware.MessageMiddleware",
    "assistant.orgs.middleware.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
    "axes.middleware.AxesMiddleware",
    "assistant.chat.htmx.htmx_redirects",
]

ROOT_URLCONF = "assistant.urls"
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
                "django.template.context_processors.i18n",
                "assistant.chat.theme.theme",
            ],
        },
    },
]
ASGI_APPLICATION = "assistant.asgi.application"
WSGI_APPLICATION = None

DATABASES: dict[str, dict[str, Any]] = {
    "default": {
        "ENGINE": "django.db.backends.sqlite3",
        "NAME": os.environ.get("SQLITE_PATH", str(BASE_DIR / "db.sqlite3")),
        # Kept open between requests and database calls (Django closes it after each of them otherwise, and opens
        # it again with the pragmas below: a tenth of the database thread's time with 50 runs streaming).
        "CONN_MAX_AGE": 60,
        # Runs write steps while pages read them: WAL and a busy timeout avoid "database is locked";
        # synchronous=NORMAL (safe with WAL) spares each commit a disk flush, 50 runs saving at once.
        "OPTIONS": {
            "timeout": 20,
            "transaction_mode": "IMMEDIATE",
            "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
        },
    }
}
# DATABASE_URL (e.g. postgres://user@host:5432/name) switches to that database; SQLite stays the default.
if os.environ.get("DATABASE_URL"):
    import dj_database_url

    # A plain dict like the one above (parse() returns a TypedDict, which a dict[str, Any] does not take).
    DATABASES["default"] = dict(dj_database_url.parse(os.environ["DATABASE_URL"], conn_max_age=60))
    if DATABASES["default"]["ENGINE"] == "django.db.backends.postgresql":
        # A pool (psycopg_pool): under ASGI each request's synchronous code runs in a thread of its own, whose
        # connection a persistent setting (CONN_MAX_AGE) never serves again: without a pool, every request
        # connected anew (about 4 ms). Django returns a request's connection to the pool when it ends.
        DATABASES["default"]["CONN_MAX_AGE"] = 0
        DATABASES["default"].setdefault("OPTIONS", {})["pool"] = {
            "min_size": int(os.environ.get("DB_POOL_MIN", "2")),
            "max_size": int(os.environ.get("DB_POOL_MAX", "20")),
            "timeout": float(os.environ.get("DB_POOL_TIMEOUT", "10")),
        }

# A run publishes every text delta; a page's queue must hold a whole answer streamed at full speed
# (the in-memory layer drops what overflows, which the page then has to read back from the database).
CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer", "CONFIG": {"capacity": 5_000}}}

# Scale-out (docs/SCALING.md). REDIS_URL (e.g. redis://127.0.0.1:6379/0) switches the channel layer to
# Redis, so that every web server and worker reaches every page, and is Celery's broker unless
# CELERY_BROKER_URL names another. RUNS_EXECUTOR=celery sends runs to Celery workers instead of executing
# them in the web server's event loop; each worker executes up to RUNS_WORKER_CONCURRENCY runs at once.
# REDIS_PREFIX starts every key, so that several deployments (or test runs) can share one Redis.
REDIS_URL = os.environ.get("REDIS_URL", "")
REDIS_PREFIX = os.environ.get("REDIS_PREFIX", "assistant")
if REDIS_URL:
    CHANNEL_LAYERS = {
        "default": {
            "BACKEND": "channels_redis.core.RedisChannelLayer",
            # redis-py 8 cuts reads after 5 s by default, as long as the layer's blocking pop: longer.
            "CONFIG": {
                "hosts": [{"address": REDIS_URL, "socket_timeout": 15}],
                "prefix": f"{REDIS_PREFIX}:asgi",
                "capacity": 5_000,
            },
        }
    }
RUNS_EXECUTOR = os.environ.get("RUNS_EXECUTOR", "embedded")
if RUNS_EXECUTOR not in {"embedded", "celery"}:
    raise RuntimeError("RUNS_EXECUTOR must be 'embedded' (the default) or 'celery'.")
CELERY_BROKER_URL = os.environ.get("CELERY_BROKER_URL", REDIS_URL)
if RUNS_EXECUTOR == "celery" and not CELERY_BROKER_URL:
    raise RuntimeError("RUNS_EXECUTOR=celery needs REDIS_URL (or CELERY_BROKER_URL).")
RUNS_WORKER_CONCURRENCY = int(os.environ.get("RUNS_WORKER_CONCURRENCY", "8"))
# An executing run renews its lease every RUNS_HEARTBEAT_SECONDS; one not renewed for RUNS_LEASE_SECONDS
# (its worker was killed, its machine lost) is marked failed. A run no worker took within
# RUNS_QUEUE_SECONDS is failed too: no run stays "running" forever.
RUNS_HEARTBEAT_SECONDS = float(os.environ.get("RUNS_HEARTBEAT_SECONDS", "5"))
RUNS_LEASE_SECONDS = float(os.environ.get("RUNS_LEASE_SECONDS", "30"))
RUNS_QUEUE_SECONDS = float(os.environ.get("RUNS_QUEUE_SECONDS", "900"))

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
]
LOGIN_URL = "login"
# A failed CSRF check answers an htmx request with a notice next to its form (assistant/chat/htmx.py).
CSRF_FAILURE_VIEW = "assistant.chat.htmx.csrf_failure"
LOGIN_REDIRECT_URL = "home"
LOGOUT_REDIRECT_URL = "login"

LANGUAGE_CODE = "en"
LANGUAGES = [("en", "English"), ("fr", "Français")]
LOCALE_PATHS = [BASE_DIR / "locale"]
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = BASE_DIR / "staticfiles"
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

SESSION_COOKIE_HTTPONLY = True
CSRF_COOKIE_HTTPONLY = False
# Production (debug off) is served over HTTPS, by a proxy if need be: its cookies are never sent in clear.
# DJANGO_SECURE_COOKIES=false for a server that must answer plain HTTP.
SESSION_COOKIE_SECURE = CSRF_COOKIE_SECURE = env_bool("DJANGO_SECURE_COOKIES", not DEBUG)
X_FRAME_OPTIONS = "DENY"
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"
SECURE_CROSS_ORIGIN_OPENER_POLICY = "same-origin"
# Every page's Content-Security-Policy: scripts, styles, fetches and the live chat's websocket ('self'
# covers ws: and wss: of the page's own host and port, CSP Level 3) from this site only, no inline script
# or style, no eval, no plugin, never framed. A stored file served for download has its own sandboxing
# policy (assistant/orgs/http.py).
CONTENT_SECURITY_POLICY = {
    "DIRECTIVES": {
        "default-src": ["'self'"],
        "script-src": ["'self'"],
        "style-src": ["'self'"],
        "img-src": ["'self'", "data:"],
        "connect-src": ["'self'"],
        "frame-ancestors": ["'none'"],
        "base-uri": ["'self'"],
        "form-action": ["'self'"],
        "object-src": ["'none'"],
    }
}
# Behind TLS (docs/OPERATIONS.md): DJANGO_SECURE_SSL_REDIRECT sends plain HTTP to HTTPS,
# DJANGO_HSTS_SECONDS makes browsers use HTTPS only for that long (0: no Strict-Transport-Security), and
# behind a proxy that ends TLS, DJANGO_SECURE_PROXY_SSL_HEADER names the header it sets for HTTPS requests
# (e.g. "X-Forwarded-Proto"; the proxy must drop that header from clients' requests).
SECURE_SSL_REDIRECT = env_bool("DJANGO_SECURE_SSL_REDIRECT", False)
SECURE_HSTS_SECONDS = int(os.environ.get("DJANGO_HSTS_SECONDS", "0"))
SECURE_HSTS_INCLUDE_SUBDOMAINS = env_bool("DJANGO_HSTS_INCLUDE_SUBDOMAINS", False)
SECURE_HSTS_PRELOAD = env_bool("DJANGO_HSTS_PRELOAD", False)
_proxy_ssl_header = os.environ.get("DJANGO_SECURE_PROXY_SSL_HEADER", "").strip()
SECURE_PROXY_SSL_HEADER = (
    ("HTTP_" + _proxy_ssl_header.upper().replace("-", "_"), "https") if _proxy_ssl_header else None
)

# The offline demo provider streams at this pace (seconds between words) so live progress shows.
DEMO_PACE = float(os.environ.get("DEMO_PACE", "0.03"))
DEMO_LATENCY = float(os.environ.get("DEMO_LATENCY", "0.4"))

# Model providers. A provider without a key is not offered (the admin's catalogue says why).
# OPENAI_BASE_URL may point at any OpenAI-compatible server (vLLM, Ollama, llama.cpp).
MISTRAL_API_KEY = os.environ.get("MISTRAL_API_KEY", "")
MISTRAL_BASE_URL = os.environ.get("MISTRAL_BASE_URL", "") or None
OPENAI_API_KEY = os.environ.get("OPENAI_API_KEY", "")
OPENAI_BASE_URL = os.environ.get("OPENAI_BASE_URL", "") or None
# The electricity mix carbon estimates use (ISO 3166-1 alpha-3 code, e.g. FRA, DEU, USA; WOR = world).
ELECTRICITY_ZONE = os.environ.get("ELECTRICITY_ZONE", "FRA")

# Knowledge bases: uploaded originals live under MEDIA_ROOT; an upload sends at most KB_MAX_UPLOAD_FILES files
# of at most KB_MAX_UPLOAD_MB each. The server refuses a body over those limits as it arrives, before it is read
# whole (assistant/server/server.py); no request body is longer.
MEDIA_ROOT = Path(os.environ.get("MEDIA_ROOT", str(BASE_DIR / "media")))
KB_MAX_UPLOAD_MB = float(os.environ.get("KB_MAX_UPLOAD_MB", "20"))
KB_MAX_UPLOAD_FILES = int(os.environ.get("KB_MAX_UPLOAD_FILES", "10"))
DATA_UPLOAD_MAX_NUMBER_FILES = KB_MAX_UPLOAD_FILES
# The longest message the composer accepts (the server refuses a longer one; the page counts down near it).
CHAT_MAX_MESSAGE_CHARS = int(os.environ.get("CHAT_MAX_MESSAGE_CHARS", "32000"))
# An upload's text is extracted off the request (knowledge/processing.py), in a child process with these
# limits: CPU seconds, wall seconds (then it is killed), address space; while decoding, at most
# KB_EXTRACT_MAX_EXPANDED_MB of decompressed data, KB_EXTRACT_MAX_TEXT_CHARS of text, KB_EXTRACT_MAX_PAGES
# pages. The embedded default extracts KB_EXTRACT_WORKERS uploads at once (by default the cores less one, at least
# one: a core stays the server's; the others wait), each child at a lower priority (nice 10); scaled out,
# Celery workers do. A document still processing after KB_EXTRACT_STALE_SECONDS is failed (a stopped server).
KB_EXTRACT_CPU_SECONDS = int(os.environ.get("KB_EXTRACT_CPU_SECONDS", "30"))
KB_EXTRACT_WALL_SECONDS = float(os.environ.get("KB_EXTRACT_WALL_SECONDS", "60"))
KB_EXTRACT_MEMORY_MB = int(os.environ.get("KB_EXTRACT_MEMORY_MB", "1024"))
KB_EXTRACT_MAX_EXPANDED_MB = float(os.environ.get("KB_EXTRACT_MAX_EXPANDED_MB", "50"))
KB_EXTRACT_MAX_TEXT_CHARS = int(os.environ.get("KB_EXTRACT_MAX_TEXT_CHARS", "10000000"))
KB_EXTRACT_MAX_PAGES = int(os.environ.get("KB_EXTRACT_MAX_PAGES", "2000"))
KB_EXTRACT_WORKERS = int(os.environ.get("KB_EXTRACT_WORKERS", str(max(1, (os.cpu_count() or 2) - 1))))
KB_EXTRACT_STALE_SECONDS = float(os.environ.get("KB_EXTRACT_STALE_SECONDS", "900"))
# A request's body (files uploaded to a knowledge base excepted): over it, 413 (API) or a refusal next to the form.
DATA_UPLOAD_MAX_MEMORY_SIZE = int(float(os.environ.get("MAX_REQUEST_BODY_MB", "4")) * 1024 * 1024)
# The most messages one API request may carry (400 above).
API_MAX_MESSAGES = int(os.environ.get("API_MAX_MESSAGES", "500"))
# Tables (CSV, XLSX sheets, Parquet documents): their rows are searchable text up to KB_TABLE_TEXT_CHARS
# characters per document. data_query (engine/tables.py) shows at most DATA_QUERY_MAX_ROWS rows of a result,
# stops a query after DATA_QUERY_SECONDS and past DATA_QUERY_MEMORY_MB of memory.
KB_TABLE_TEXT_CHARS = int(os.environ.get("KB_TABLE_TEXT_CHARS", "200000"))
DATA_QUERY_MAX_ROWS = int(os.environ.get("DATA_QUERY_MAX_ROWS", "50"))
DATA_QUERY_SECONDS = float(os.environ.get("DATA_QUERY_SECONDS", "10"))
DATA_QUERY_MEMORY_MB = int(os.environ.get("DATA_QUERY_MEMORY_MB", "256"))
# At most this many data_query statements at once in one process's event loop, the others wait their turn (their
# time limit starts with it). DuckDB takes a core per query: by default one core is left to the loop.
DATA_QUERY_CONCURRENT = int(os.environ.get("DATA_QUERY_CONCURRENT", str(max(1, (os.cpu_count() or 2) - 1))))
# Web tools: web_search through a SearxNG-compatible JSON endpoint (absent when unset); web_fetch comes
# with it, or alone with WEB_FETCH_ENABLED. Private, loopback and link-local addresses are refused
# except for the hosts listed in WEB_FETCH_ALLOWED_HOSTS (comma-separated).
WEB_SEARCH_URL = os.environ.get("WEB_SEARCH_URL", "")
WEB_FETCH_ENABLED = env_bool("WEB_FETCH_ENABLED", bool(WEB_SEARCH_URL))
WEB_FETCH_ALLOWED_HOSTS = [
    h.strip().lower() for h in os.environ.get("WEB_FETCH_ALLOWED_HOSTS", "").split(",") if h.strip()
]
WEB_TIMEOUT_SECONDS = float(os.environ.get("WEB_TIMEOUT_SECONDS", "15"))
WEB_FETCH_MAX_MB = float(os.environ.get("WEB_FETCH_MAX_MB", "5"))
# The demo web (`make run` sets DEMO_WEB=1; off otherwise): web_search and web_fetch read the fictional pages
# the project ships (assistant/demo/web), offline, instead of the internet, whatever WEB_SEARCH_URL says.
DEMO_WEB = env_bool("DEMO_WEB", False)

# Connectors (MCP servers an admin registers as mcp:<name>): their addresses pass the same guard as
# web_fetch; CONNECTOR_ALLOWED_HOSTS (comma-separated, host = ports 80/443, host:port = that port)
# lists internal servers. Each call is bounded in seconds and its result in characters. Header
# values come from environment variables named CONNECTOR_… that the admin names in the form.
CONNECTOR_ALLOWED_HOSTS = [
    h.strip().lower() for h in os.environ.get("CONNECTOR_ALLOWED_HOSTS", "").split(",") if h.strip()
]
CONNECTOR_TIMEOUT_SECONDS = float(os.environ.get("CONNECTOR_TIMEOUT_SECONDS", "20"))
CONNECTOR_MAX_CHARS = int(os.environ.get("CONNECTOR_MAX_CHARS", "20000"))
# run_code: Python in a sandboxed child process (see docs/TOOLS.md); off unless enabled.
RUN_CODE_ENABLED = env_bool("RUN_CODE_ENABLED", False)
RUN_CODE_CPU_SECONDS = int(os.environ.get("RUN_CODE_CPU_SECONDS", "10"))
RUN_CODE_WALL_SECONDS = float(os.environ.get("RUN_CODE_WALL_SECONDS", "20"))
RUN_CODE_MEMORY_MB = int(os.environ.get("RUN_CODE_MEMORY_MB", "512"))
# At most this many scripts at once in one process (the others wait their turn, their limits not started): a
# process's scripts take at most RUN_CODE_CONCURRENT x RUN_CODE_MEMORY_MB. By default the cores less one.
RUN_CODE_CONCURRENT = int(os.environ.get("RUN_CODE_CONCURRENT", str(max(1, (os.cpu_count() or 2) - 1))))

# Budget alerts are emailed to organisation admins. Without EMAIL_BACKEND, a development server prints
# them on the console and production sends them over SMTP (EMAIL_HOST, EMAIL_PORT…).
EMAIL_BACKEND = os.environ.get(
    "EMAIL_BACKEND",
    "django.core.mail.backends.console.EmailBackend" if DEBUG else "django.core.mail.backends.smtp.EmailBackend",
)
EMAIL_HOST = os.environ.get("EMAIL_HOST", "localhost")
EMAIL_PORT = int(os.environ.get("EMAIL_PORT", "25"))
EMAIL_TIMEOUT = 10
DEFAULT_FROM_EMAIL = os.environ.get("DEFAULT_FROM_EMAIL", "assistant@localhost")

# Accounts and keys (docs/CONFIGURATION.md; docs/SECURITY.md) ---------------------------------------
# Sign-in throttling (django-axes): after SIGNIN_FAILURE_LIMIT failed sign-ins of one account, or from one
# address, that account or address is refused for SIGNIN_LOCKOUT_MINUTES (counted from the last failure).
# SIGNIN_LOCKOUT_PARAMETERS lists what is counted apart, comma-separated, "+" joining a combination:
# "username,ip_address" (the default), "username+ip_address", "ip_address"...
AUTHENTICATION_BACKENDS = [
    "assistant.orgs.signin.SignInThrottle",  # django-axes' backend, first: a locked-out account or address stops here
    "django.contrib.auth.backends.ModelBackend",
]
AXES_FAILURE_LIMIT = int(os.environ.get("SIGNIN_FAILURE_LIMIT", "10"))
SIGNIN_LOCKOUT_MINUTES = int(os.environ.get("SIGNIN_LOCKOUT_MINUTES", "15"))
AXES_COOLOFF_TIME = timedelta(minutes=SIGNIN_LOCKOUT_MINUTES)
AXES_LOCKOUT_PARAMETERS: list[str | list[str]] = [
    part.split("+") if "+" in part else part
    for part in (p.strip() for p in os.environ.get("SIGNIN_LOCKOUT_PARAMETERS", "username,ip_address").split(","))
    if part
]
AXES_LOCKOUT_CALLABLE = "assistant.orgs.signin.locked_out"
AXES_RESET_ON_SUCCESS = False  # a success from the attacker's own account must not clear an address's count
# Behind a reverse proxy, TRUSTED_PROXY_COUNT proxies append to X-Forwarded-For: the client is the address
# they saw (used by sign-in throttling and the API's failed-key limit). 0: the connection's own address.
TRUSTED_PROXY_COUNT = int(os.environ.get("TRUSTED_PROXY_COUNT", "0"))
AXES_CLIENT_IP_CALLABLE = "assistant.orgs.signin.client_address"
# Password reset links (Django's views, sent with the EMAIL_BACKEND above) are valid this long.
PASSWORD_RESET_TIMEOUT = int(os.environ.get("PASSWORD_RESET_HOURS", "24")) * 3600
PASSWORD_RESET_LIMIT = int(os.environ.get("PASSWORD_RESET_LIMIT", "5"))  # reset requests an hour from one address
# The cache counts API requests per key and failed keys per address: Redis with REDIS_URL (shared by every
# web server), else this process's memory.
CACHES: dict[str, dict[str, Any]] = {
    "default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache", "LOCATION": "assistant"}
}
if REDIS_URL:
    CACHES["default"] = {
        "BACKEND": "django.core.cache.backends.redis.RedisCache",
        "LOCATION": REDIS_URL,
        "KEY_PREFIX": f"{REDIS_PREFIX}:cache",
    }
# API keys: requests per minute of a key without its own limit; a rotated key's grace period; and after
# API_FAILED_KEY_LIMIT unknown, revoked or expired keys from one address within API_FAILED_KEY_WINDOW_SECONDS,
# that address is refused (429) for API_FAILED_KEY_LOCKOUT_SECONDS.
API_KEY_RATE_LIMIT = int(os.environ.get("API_KEY_RATE_LIMIT", "60"))
API_KEY_ROTATION_GRACE_HOURS = float(os.environ.get("API_KEY_ROTATION_GRACE_HOURS", "24"))
API_FAILED_KEY_LIMIT = int(os.environ.get("API_FAILED_KEY_LIMIT", "20"))
API_FAILED_KEY_WINDOW_SECONDS = int(os.environ.get("API_FAILED_KEY_WINDOW_SECONDS", "600"))
API_FAILED_KEY_LOCKOUT_SECONDS = int(os.environ.get("API_FAILED_KEY_LOCKOUT_SECONDS", "900"))

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "root": {"handlers": ["console"], "level": os.environ.get("LOG_LEVEL", "INFO")},
}
