import os

from celery import Celery
from celery.signals import worker_ready
from django.conf import settings

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "cairn.settings")

app = Celery("cairn")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


@worker_ready.connect
def heartbeat_on_start(sender=None, **kwargs):
    """One heartbeat as soon as a worker is ready (beat sends the next ones), so Job
    runs is never empty on a running stack. Sent by name: cairn imports no domain."""
    if getattr(settings, "CAIRN_HEARTBEAT_ON_START", True):
        app.send_task("memory.tasks.heartbeat")
