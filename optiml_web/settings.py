"""Django settings, read from the environment (docker/.env.example lists every variable).

The defaults are the embedded set-up: SQLite under var/, no Redis, DEBUG on, a secret
key generated once into var/secret_key. Production sets DATABASE_URL, REDIS_URL,
OPTIML_SECRET_KEY and OPTIML_DEBUG=false.
"""

from pathlib import Path

from django.core.exceptions import ImproperlyConfigured

from optiml_web.env import (
    allowed_hosts,
    caches,
    celery_broker,
    channel_layers,
    env_bool,
    env_float,
    env_int,
    env_rate,
    env_secret,
    env_str,
    evaluator_setting,
    parse_database_url,
    secret_key,
    sqlite_database,
)

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = Path(env_str("OPTIML_VAR_DIR", str(BASE_DIR / "var")))

DEBUG = env_bool("OPTIML_DEBUG", True)
SECRET_KEY = secret_key(debug=DEBUG, var_dir=VAR_DIR)
ALLOWED_HOSTS = allowed_hosts(env_str("OPTIML_ALLOWED_HOSTS"), debug=DEBUG)
CSRF_TRUSTED_ORIGINS = [o for o in env_str("OPTIML_CSRF_TRUSTED_ORIGINS").split(",") if o]

# Cookies and transport. In production (DEBUG off) the session and CSRF cookies are sent
# over HTTPS only; OPTIML_SECURE_COOKIES=false is for a deployment reached over plain
# HTTP on a private network, and says so. Behind a TLS-terminating proxy that sets
# X-Forwarded-Proto, OPTIML_BEHIND_TLS_PROXY=true lets Django see the request as HTTPS.
SESSION_COOKIE_SECURE = CSRF_COOKIE_SECURE = env_bool("OPTIML_SECURE_COOKIES", not DEBUG)
SESSION_COOKIE_HTTPONLY = True
SESSION_COOKIE_SAMESITE = CSRF_COOKIE_SAMESITE = "Lax"
if env_bool("OPTIML_BEHIND_TLS_PROXY", False):
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
# Strict-Transport-Security, in seconds (0: not sent). Set it once HTTPS works for good:
# browsers remember it.
SECURE_HSTS_SECONDS = env_int("OPTIML_HSTS_SECONDS", 0)
SECURE_CONTENT_TYPE_NOSNIFF = True  # X-Content-Type-Options: nosniff
SECURE_REFERRER_POLICY = "same-origin"  # a share page's URL (its token) never leaves the site
X_FRAME_OPTIONS = "DENY"

INSTALLED_APPS = [
    # The project's runserver (daphne's, with the image's server) before daphne's, and
    # daphne's before Django's: it serves ASGI (websockets) in place of the WSGI one.
    "optiml_web",
    "daphne",
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "channels",
    "rest_framework",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "accounts",
    "profiling",
    "search",
    "lineage",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "csp.middleware.CSPMiddleware",
    # An API operation refuses a query parameter its schema does not document (a 400).
    "optiml_web.query_guard.UndocumentedQueryMiddleware",
    # Last: it turns a sign-in refused for too many failures into the page that says how
    # long to wait, and sets the known-device cookie after a sign-in.
    "accounts.middleware.SignInThrottleMiddleware",
]

if not DEBUG:
    # Serves `collectstatic` output from the ASGI process in production; under DEBUG,
    # runserver serves static files itself and STATIC_ROOT need not exist.
    MIDDLEWARE.insert(1, "whitenoise.middleware.WhiteNoiseMiddleware")

ROOT_URLCONF = "optiml_web.urls"
WSGI_APPLICATION = "optiml_web.wsgi.application"
ASGI_APPLICATION = "optiml_web.asgi.application"

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

_database_url = env_secret("DATABASE_URL")
DATABASES = {
    "default": (
        parse_database_url(_database_url) if _database_url else sqlite_database(VAR_DIR / "db.sqlite3")
    )
}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# The throttle first (accounts/backends.py): it refuses a sign-in that must wait after too
# many failures before any password is checked.
AUTHENTICATION_BACKENDS = [
    "accounts.backends.SignInThrottleBackend",
    "django.contrib.auth.backends.ModelBackend",
]

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "/"
LOGOUT_REDIRECT_URL = "login"
# Sign-in throttling (accounts/signing_in.py, counted in the database so that every web
# process sees the same counts): a back-off that grows, never a lock. Failures count under
# the (username, address) pair, and under the address with a larger free allowance (against
# guessing many names); a browser that has signed in as the name before counts under its
# own device cookie instead, so nobody else's failures hold it up. Past the free failures
# (OPTIML_LOGIN_FAILURE_LIMIT, OPTIML_LOGIN_ADDRESS_FAILURE_LIMIT) each try waits
# OPTIML_LOGIN_FIRST_WAIT_S after the latest failure, doubling per failure up to
# OPTIML_LOGIN_LONGEST_WAIT_S; counts are forgotten OPTIML_LOGIN_MEMORY_S after their latest
# failure. The address is REMOTE_ADDR: behind a proxy, run daphne with --proxy-headers.
OPTIML_LOGIN_FAILURE_LIMIT = env_int("OPTIML_LOGIN_FAILURE_LIMIT", 5)
OPTIML_LOGIN_ADDRESS_FAILURE_LIMIT = env_int("OPTIML_LOGIN_ADDRESS_FAILURE_LIMIT", 50)
OPTIML_LOGIN_FIRST_WAIT_S = env_int("OPTIML_LOGIN_FIRST_WAIT_S", 2)
OPTIML_LOGIN_LONGEST_WAIT_S = env_int("OPTIML_LOGIN_LONGEST_WAIT_S", 15 * 60)
OPTIML_LOGIN_MEMORY_S = env_int("OPTIML_LOGIN_MEMORY_S", 24 * 3600)
if min(OPTIML_LOGIN_FAILURE_LIMIT, OPTIML_LOGIN_ADDRESS_FAILURE_LIMIT, OPTIML_LOGIN_FIRST_WAIT_S) < 1 or (
        OPTIML_LOGIN_LONGEST_WAIT_S < OPTIML_LOGIN_FIRST_WAIT_S):
    raise ImproperlyConfigured("OPTIML_LOGIN_*: the limits and the first wait are at least 1, and the "
                               "longest wait at least the first")
# Sign-up (accounts/joining.py). Open sign-up, where anyone who reaches the site makes an
# account at /accounts/sign-up/, is on in the embedded default (SQLite, debug) and off in
# production (DATABASE_URL set or OPTIML_DEBUG=false), where people join by a team
# admin's invitation link (OPTIML_OPEN_SIGN_UP=true opens it anyway): used once,
# open for OPTIML_INVITATION_DAYS days. One address makes at most
# OPTIML_SIGN_UP_ADDRESS_LIMIT accounts an hour by open sign-up: a person needs one, a
# room of colleagues behind one NAT address a few, a script many.
OPTIML_OPEN_SIGN_UP = env_bool("OPTIML_OPEN_SIGN_UP", DEBUG and not _database_url)
OPTIML_INVITATION_DAYS = env_int("OPTIML_INVITATION_DAYS", 7)
if OPTIML_INVITATION_DAYS < 1:
    raise ImproperlyConfigured(f"OPTIML_INVITATION_DAYS={OPTIML_INVITATION_DAYS}: at least 1 day")
OPTIML_SIGN_UP_ADDRESS_LIMIT = env_int("OPTIML_SIGN_UP_ADDRESS_LIMIT", 10)

# Request bodies. Django's own limit (forms, the admin) at its default, 2.5 MiB, which
# also bounds the API's JSON (optiml_web.limits.LimitedJSONParser): a kernel at the gate's
# size limit (512 KiB) fits with its plan, even escaped. Importing a trajectory is the one
# larger request: it carries every node's full verdict (tens of kB each), and a few
# hundred nodes must fit.
DATA_UPLOAD_MAX_MEMORY_SIZE = 2560 * 1024
OPTIML_MAX_IMPORT_BYTES = env_int("OPTIML_MAX_UPLOAD_MB", 64) * 1024 * 1024
# Imports one web process reads at once (search.throttles.ImportSlots): each holds up to
# about five times its body in memory while it is checked and written, so two of 64 MiB
# stay under 1 GB. Another waits up to OPTIML_IMPORT_WAIT_S seconds, then gets a 503.
OPTIML_IMPORTS_AT_ONCE = env_int("OPTIML_IMPORTS_AT_ONCE", 2)
if OPTIML_IMPORTS_AT_ONCE < 1:
    raise ImproperlyConfigured(f"OPTIML_IMPORTS_AT_ONCE={OPTIML_IMPORTS_AT_ONCE}: at least 1")
OPTIML_IMPORT_WAIT_S = env_float("OPTIML_IMPORT_WAIT_S", 30.0)

REST_FRAMEWORK = {
    # Pages and API share the browser's session; SessionAuthentication checks CSRF on
    # writes. Ours answers a signed-out request 401, not DRF's 403.
    "DEFAULT_AUTHENTICATION_CLASSES": ["accounts.authentication.SessionAuthentication"],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    # JSON in, read up to a size limit before parsing (optiml_web/limits.py), and JSON out:
    # no browsable HTML API (its forms post what the parser refuses, and its inline styles
    # the Content-Security-Policy); /api/docs/ is the API to browse.
    "DEFAULT_PARSER_CLASSES": ["optiml_web.limits.LimitedJSONParser"],
    "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer"],
    # Any error is JSON; an unexpected one is logged and answers a bare 500.
    "EXCEPTION_HANDLER": "optiml_web.errors.api_exception_handler",
    # Documents the 4xx answers each operation can give (optiml_web/schema.py).
    "DEFAULT_SCHEMA_CLASS": "optiml_web.schema.ApiSchema",
}
SPECTACULAR_SETTINGS = {
    "TITLE": "OptiML Studio API",
    "DESCRIPTION": ("Runs, their search trees, node evidence, share links and live events; "
                    "the skill library and its review."),
    "VERSION": "0.1.0",
    "SERVE_INCLUDE_SCHEMA": False,
    # Swagger UI's files come from the sidecar package, not a CDN.
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    # One name for the skill cards' statuses wherever they appear (a card's, a review's
    # before and after); runs and writing jobs each name theirs, two sets of one field name.
    "ENUM_NAME_OVERRIDES": {"SkillCardStatusEnum": "lineage.models.SkillCard.Status",
                            "RunStatusEnum": "search.models.Run.Status",
                            "WritingJobStatusEnum": "search.models.WritingJob.Status"},
}

STATIC_URL = "static/"
STATIC_ROOT = Path(env_str("OPTIML_STATIC_ROOT", str(VAR_DIR / "static")))
# The browser bundle, built by `make frontend` (vite: frontend/ -> frontend/dist/).
STATICFILES_DIRS = [BASE_DIR / "frontend" / "dist"]

REDIS_URL = env_secret("REDIS_URL") or ""
CHANNEL_LAYERS = channel_layers(REDIS_URL)
CACHES = caches(REDIS_URL)
# Per signed-in user (search/throttles.py; over the limit: 429 with Retry-After), counted
# in CACHES["throttle"]. A run queues GPU work for its whole budget: a person starts a few
# an hour, a script sweeping options a few dozen. An import reads a body of up to
# OPTIML_MAX_IMPORT_BYTES (several times that in memory while it is checked and written);
# nobody imports more than a handful of exported runs an hour. "off" lifts a limit.
OPTIML_THROTTLE_RATES = {
    "run_create": env_rate("OPTIML_RUN_CREATE_RATE", "60/hour"),
    "run_import": env_rate("OPTIML_RUN_IMPORT_RATE", "20/hour"),
    # The New session form checks before each start, and again on "Check": a few per run.
    "run_preflight": env_rate("OPTIML_RUN_PREFLIGHT_RATE", "240/hour"),
}
OPTIML_THROTTLE_CACHE = "throttle"
# Live run views: seconds between looks at the database for new events. The embedded
# default keeps channel groups in memory, which the worker (another process) cannot
# reach, so the web process looks itself: one cheap query per watched run, shared by
# all its viewers. With Redis the worker's group messages arrive, and 0 turns looking off.
OPTIML_LIVE_POLL_S = env_float("OPTIML_LIVE_POLL_S", 0.0 if REDIS_URL else 0.1)
# Events reaching a viewer within this many seconds go out in one websocket frame: a
# burst of a run's events costs a browser at most 1 / OPTIML_LIVE_COALESCE_S frames a second.
OPTIML_LIVE_COALESCE_S = env_float("OPTIML_LIVE_COALESCE_S", 0.2)
# A skill card's page hears of changes through the channel layer; in the embedded default
# (no Redis) a change made by another process (manage.py lineage admit, a worker) is not
# heard there, so each viewer also reads the card's revision this often (0: never).
OPTIML_CARD_POLL_S = env_float("OPTIML_CARD_POLL_S", 0.0 if REDIS_URL else 1.0)
# Threads (and so database connections at a time) on which a web process's websockets read
# the database: handshakes side by side instead of one at a time (optiml_web.socket_reads).
OPTIML_SOCKET_DB_THREADS = env_int("OPTIML_SOCKET_DB_THREADS", 8)
if OPTIML_SOCKET_DB_THREADS < 1:
    raise ImproperlyConfigured(f"OPTIML_SOCKET_DB_THREADS={OPTIML_SOCKET_DB_THREADS} must be at least 1")
# Read by optiml_web/celery.py through config_from_object(namespace="CELERY").
CELERY_BROKER_URL, CELERY_BROKER_TRANSPORT_OPTIONS = celery_broker(REDIS_URL, VAR_DIR)
# Results live in Evaluation rows, so Celery keeps none.
CELERY_TASK_IGNORE_RESULT = True
CELERY_RESULT_BACKEND = None
# A GPU evaluation runs for minutes: take one message at a time and acknowledge it only
# when done, so a worker that dies mid-run leaves the message for another. Running it
# twice costs nothing: Evaluation rows are claimed in the database.
CELERY_TASK_ACKS_LATE = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1

# Where verdicts come from: "gate" (nvcc here, a GPU if there is one) or
# "recorded:<path>" (verdicts measured earlier on a real GPU, for CI and demos).
OPTIML_EVALUATOR = evaluator_setting(env_str("OPTIML_EVALUATOR", "gate"))
OPTIML_WORKDIR = Path(env_str("OPTIML_WORKDIR", str(VAR_DIR / "work")))
# The secret the gate's correctness seeds are derived from (profiling.harness.seeds);
# unset, derived from SECRET_KEY (profiling.services.gate_secret).
OPTIML_GATE_SECRET = env_secret("OPTIML_GATE_SECRET")
# Screen a run's candidates before the full gate, as the CLI does (docs/gate.md, "The screen"):
# once a run has a full-gate best, only candidates the screen finds faster get the full
# gate. A run can turn it off for itself; this turns it off for every run.
OPTIML_SCREEN = env_bool("OPTIML_SCREEN", True)
# Where tasks declared in the browser are written as <name>.json. The profiling app puts
# it on OPTIML_TASK_PATH at start-up, so the web process, the Celery worker and the gate's
# subprocesses all know the tasks by name; a worker on another host writes the files it
# lacks from the database (profiling.services.task_spec).
OPTIML_TASK_DIR = Path(env_str("OPTIML_TASK_DIR", str(VAR_DIR / "tasks")))
# Where a search's proposals come from, besides its judge: dotted paths of classes with
# a no-argument constructor. The lineage app's skill source is added here, not imported
# by search; it is on by default, as in the CLI (search/engine/__main__.py), and reads
# the library `make start` fills (manage.py lineage bootstrap).
OPTIML_PROPOSAL_SOURCES = [
    path.strip()
    for path in env_str(
        "OPTIML_PROPOSAL_SOURCES",
        "search.engine.sources.TunableSource,search.engine.rewrites.RewriteSource,"
        "lineage.sources.StoredSkillSource",
    ).split(",")
    if path.strip()
]
# Which stored skill cards lineage.sources.StoredSkillSource proposes from, by status.
# A team's library: the approved ones (its reviewers approve a card after its roundtrip
# reproduced its effect); "approved,verified" lets cards not yet reviewed in. The
# project's default library: the verified ones too, because what fills it is the
# recordings committed here (lineage bootstrap), whose roundtrip on the H200 reproduced
# every verified card's effect: a new user searches with them before anyone reviews.
# "approved" makes the default library wait for its reviewers too. A rejected, retired,
# failed or merely induced card is never used unless a status named here says so.
OPTIML_SKILL_STATUSES = [
    s.strip() for s in env_str("OPTIML_SKILL_STATUSES", "approved").split(",") if s.strip()
]
OPTIML_DEFAULT_LIBRARY_SKILL_STATUSES = [
    s.strip() for s in env_str("OPTIML_DEFAULT_LIBRARY_SKILL_STATUSES", "approved,verified").split(",")
    if s.strip()
]
# The skeleton cards (a family's schedule for any kernel that lifts to it, docs/forms.md)
# join the stored token cards in the app's searches, as in the CLI: those induced from the
# recorded lineages and admitted by transfer (lineage/engine/skeleton_cards.py). They are
# not rows of a library yet, so a team cannot review them; OPTIML_SKELETON_CARDS=false
# leaves them out (the engine's own OPTIML_SKILL_SKELETONS=0 does the same in the CLI).
OPTIML_SKELETON_CARDS = env_bool("OPTIML_SKELETON_CARDS", True)
# A "running" evaluation whose worker went quiet for the gate's time limit plus this many
# seconds is taken to be abandoned (worker killed) and may be claimed again. 300 s covers
# nvcc on a large kernel and storing the verdict.
OPTIML_CLAIM_GRACE_S = env_int("OPTIML_CLAIM_GRACE_S", 300)
# A worker that evaluates holds a lease on its claim (the Evaluation row, and the run's
# node) and renews it every OPTIML_EVALUATION_HEARTBEAT_S from a thread beside the gate. A
# lease not renewed for OPTIML_EVALUATION_LEASE_S lost its worker (kill -9, OOM, host
# lost): the beat hands the node out again and the next worker takes the claim over, well
# within a minute, instead of waiting out the gate's time limit (docs/deployment.md,
# "A dead worker's evaluation"). Three heartbeats a lease, so that one slow write is no death.
OPTIML_EVALUATION_LEASE_S = env_float("OPTIML_EVALUATION_LEASE_S", 30.0)
OPTIML_EVALUATION_HEARTBEAT_S = env_float("OPTIML_EVALUATION_HEARTBEAT_S", 10.0)
if not 0 < OPTIML_EVALUATION_HEARTBEAT_S < OPTIML_EVALUATION_LEASE_S:
    raise ImproperlyConfigured(
        f"OPTIML_EVALUATION_HEARTBEAT_S={OPTIML_EVALUATION_HEARTBEAT_S} must be above 0 and below "
        f"OPTIML_EVALUATION_LEASE_S={OPTIML_EVALUATION_LEASE_S}: a lease lives through several heartbeats")
# A running run whose row has not changed for this long has lost its driver chain (a
# worker killed between a step's commit and publishing the next message): the beat's
# `search.restart_stalled_runs` starts a new chain. Longer than the longest step (the
# gate's 600 s time limit plus the grace), so a step still under way is never doubled.
OPTIML_RUN_STALL_S = env_int("OPTIML_RUN_STALL_S", 900)
# OptiML-G (search/generation/): the experts that write a first kernel from an intent,
# as JSON (docs/generation.md), or "@/path/to/experts.json". Empty: the
# LLM judge's model (OPTIML_LLM_*) writes alone, and without that, nobody writes: the
# New session page says so and starts from the task's naive kernel.
OPTIML_GENERATION_EXPERTS = env_str("OPTIML_GENERATION_EXPERTS", "")
OPTIML_GENERATION_K = env_int("OPTIML_GENERATION_K", 3)  # active experts per task, primary included
OPTIML_GENERATION_ROUNDS = env_int("OPTIML_GENERATION_ROUNDS", 3)  # repairs after the first kernel
# A writing job (POST /api/kernels/write/, search.writing) that has not moved for this
# long is failed: its worker died, or no worker took it. Each attempt moves it, so this
# must exceed one attempt: the drafts (in parallel) and the primary's composition, each
# up to an expert's timeout and retry (120 s twice by default), plus nvcc.
OPTIML_WRITING_STALE_S = env_int("OPTIML_WRITING_STALE_S", 900)
# While a writing job runs, its worker moves it this often (a thread beside the writers);
# one that missed six heartbeats lost its worker and is queued again by the beat.
OPTIML_WRITING_HEARTBEAT_S = env_float("OPTIML_WRITING_HEARTBEAT_S", 10.0)
# Where `manage.py generation dataset` finds verified kernels besides the suite's and the
# search nodes': dotted paths of functions returning search.generation.dataset pairs.
OPTIML_GENERATION_KERNEL_SOURCES = [
    p.strip()
    for p in env_str("OPTIML_GENERATION_KERNEL_SOURCES", "lineage.services.generation_pairs").split(",")
    if p.strip()
]
# The router trained by `manage.py generation train-router`; until it exists, the
# configured order decides.
OPTIML_GENERATION_ROUTER = Path(env_str("OPTIML_GENERATION_ROUTER",
                                        str(VAR_DIR / "generation" / "router.safetensors")))
# Local experts collaborate in latent space with the fusion `manage.py generation
# train-mot` trained (this file); without it they collaborate in text.
OPTIML_GENERATION_MOT = Path(env_str("OPTIML_GENERATION_MOT",
                                     str(VAR_DIR / "generation" / "mot.safetensors")))
# Compile each asked candidate on a CPU worker before its evaluation (search.compile_node),
# so that one whose binary another node of the run already runs is not measured again.
OPTIML_COMPILE_AHEAD = env_bool("OPTIML_COMPILE_AHEAD", True)

# Content-Security-Policy on every response (django-csp): scripts, styles and everything
# else from this site only, no inline script or style, no framing. The front end builds
# HTML for highlighted code, so a script that slipped into it still would not run.
# `data:` images: the favicon is an inline SVG, and Swagger UI's icons are data URIs.
CONTENT_SECURITY_POLICY = {
    "DIRECTIVES": {
        "default-src": ["'self'"],
        "script-src": ["'self'"],
        "style-src": ["'self'"],
        "img-src": ["'self'", "data:"],
        "connect-src": ["'self'"],  # the API, and the live view's websocket (same host)
        "object-src": ["'none'"],
        "base-uri": ["'self'"],
        "form-action": ["'self'"],
        "frame-ancestors": ["'none'"],
    },
}

LOG_LEVEL = env_str("OPTIML_LOG_LEVEL", "INFO")
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    # Share tokens are keys: every line is redacted before it is written (daphne's and
    # runserver's request logs, Django's "Not Found: <path>", tracebacks).
    "filters": {"redact_tokens": {"()": "optiml_web.log_redaction.RedactShareTokens"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "filters": ["redact_tokens"]}},
    "root": {"handlers": ["console"], "level": LOG_LEVEL},
    # Django's default config gives "django" (and "django.server", runserver's request log)
    # handlers of its own; replaced here so that each line prints once, redacted.
    "loggers": {
        "django": {"handlers": ["console"], "level": LOG_LEVEL, "propagate": False},
        "django.server": {"handlers": ["console"], "level": LOG_LEVEL, "propagate": False},
    },
}
