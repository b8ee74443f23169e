"""Test settings that build the schema with the migrations written before the squash."""

from cairn.settings_test import *  # noqa: F403

MIGRATION_MODULES = {"memory": "tests.migrations_legacy.memory"}
