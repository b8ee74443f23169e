"""Relative times in words: the past ("ago") and the future ("until") read alike."""

from datetime import timedelta

from django.utils import timezone

from reviews.templatetags.cairn_ui import ago, until


def test_past_moments_read_shortly():
    now = timezone.now()
    assert ago(now - timedelta(seconds=30)) == "just now"
    assert ago(now - timedelta(minutes=5, seconds=5)) == "5 min ago"
    assert ago(now - timedelta(hours=3, seconds=5)) == "3 h ago"
    assert ago(now - timedelta(days=4, seconds=5)) == "4 days ago"
    assert ago(None) == ""


def test_future_moments_read_the_same_way_and_a_missed_one_is_due():
    now = timezone.now()
    assert until(now + timedelta(seconds=30)) == "in under a minute"
    assert until(now + timedelta(minutes=5, seconds=5)) == "in 5 min"
    assert until(now + timedelta(hours=3, seconds=5)) == "in 3 h"
    assert until(now + timedelta(days=4, seconds=5)) == "in 4 days"
    assert until(now - timedelta(minutes=5, seconds=5)) == "due 5 min ago"
