"""Print this installation's export signing key, to list in another installation's
CAIRN_IMPORT_TRUSTED_KEYS so it imports this one's exports with their channels."""

from django.core.management.base import BaseCommand

from memory.privacy.signing import export_signing_key, key_id


class Command(BaseCommand):
    help = (
        "Print the key this installation signs exports with (keep it secret: whoever "
        "holds it can sign files another installation will trust)."
    )

    def handle(self, *args, **options):
        key = export_signing_key()
        self.stdout.write(key)
        self.stderr.write(f"key id {key_id(key)}")
