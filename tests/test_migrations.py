import pytest
from django.core.management import call_command


@pytest.mark.django_db
def test_models_and_migrations_agree():
    # Fails when a model changed without a migration.
    call_command("makemigrations", "--check", "--dry-run", verbosity=0)
