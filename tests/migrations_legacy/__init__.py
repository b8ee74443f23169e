"""The migration history as it stood before the squash (0001_pgvector through
0025_outcome_fk_indexes_covered), kept for tests/test_migrations.py only: it builds
a database the way an existing install has it and upgrades that to the squashed set."""
