"""The destinations a new AMQP session attaches sender links for before its first send."""

from __future__ import annotations

from failover_client.amqp._sending import PRE_ATTACHED, RecentDestinations


def test_the_newest_destinations_are_kept_up_to_the_limit_oldest_first() -> None:
    recent = RecentDestinations(limit=3)
    for name in ("/queue/a", "/queue/b", "/queue/c", "/queue/a", "/queue/d"):
        recent.used(name)
    assert recent.snapshot() == ["/queue/c", "/queue/a", "/queue/d"]


def test_a_refused_destination_is_not_attached_ahead_again() -> None:
    recent = RecentDestinations()
    recent.used("/queue/a")
    recent.used("/exchange/missing")
    recent.refused("/exchange/missing")
    recent.refused("/queue/never-used")
    assert recent.snapshot() == ["/queue/a"]


def test_the_default_limit_is_the_pre_attached_count() -> None:
    recent = RecentDestinations()
    for n in range(PRE_ATTACHED + 5):
        recent.used(f"/queue/{n}")
    assert recent.snapshot() == [f"/queue/{n}" for n in range(5, PRE_ATTACHED + 5)]
