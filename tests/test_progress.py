"""Rates and ETA (from tokens), and the quality monitor's rolling alarms."""

from __future__ import annotations

from regen.run.progress import RunStats
from regen.run.quality import QualityMonitor, Thresholds, answer_key


def test_eta_comes_from_token_rate_and_tokens_per_item():
    stats = RunStats(total=1000, finished_before=100, started=0.0)
    stats.tick(now=100.0)
    stats.completed, stats.completion_tokens = 100, 200_000  # 2,000 tokens per item
    stats.tick(now=300.0)
    rates = stats.rates(now=300.0)
    assert rates["last_5m"]["tokens_per_s"] == 200_000 / 200
    assert rates["overall"]["completions_per_s"] == round(100 / 300, 3)
    # 800 items left x 2,000 tokens at 1,000 tokens/s over the last 5 minutes.
    assert stats.eta_seconds(now=300.0) == 800 * 2000 / 1000


def test_eta_unknown_before_the_first_completion():
    assert RunStats(total=10, finished_before=0).eta_seconds() is None


def test_quality_alarms_need_a_full_enough_window_and_clear_again():
    monitor = QualityMonitor(Thresholds(window=100, min_samples=20, empty=0.1))
    for _ in range(19):
        monitor.observe("", None, "stop", thinking=False)
    assert monitor.alarms() == []  # too few samples to judge
    monitor.observe("", None, "stop", thinking=False)
    assert [a.name for a in monitor.alarms()] == ["empty"]  # empty is not "repeated_answers" too
    for i in range(100):
        monitor.observe(f"a real answer number {i}", "why", "stop", thinking=True)
    assert monitor.alarms() == []
    assert monitor.rates()["empty"] == 0.0


def test_missing_reasoning_counts_only_thinking_samples():
    monitor = QualityMonitor(Thresholds(min_samples=1))
    monitor.observe("answer one", None, "stop", thinking=False)
    monitor.observe("answer two", "", "stop", thinking=True)
    assert monitor.rates()["missing_reasoning"] == 1.0
    assert "missing_reasoning" in [a.name for a in monitor.alarms()]


def test_repeated_answers_names_the_repeated_answer():
    monitor = QualityMonitor(Thresholds(min_samples=10))
    for i in range(30):
        monitor.observe("OK." if i % 2 else f"distinct {i}", None, "stop", thinking=False)
    (alarm,) = monitor.alarms()
    assert alarm.name == "repeated_answers" and '"ok."' in str(alarm)
    assert monitor.rates()["repeated_answers"] == 14 / 30  # 15 "OK." of which 14 repeat one


def test_repeated_answers_is_zero_when_every_answer_differs():
    """The old figure (most common answer / n) read 25% for four different answers, above its
    own 20% alarm; the share of answers that repeat another is 0."""
    monitor = QualityMonitor(Thresholds(min_samples=4))
    for text in ("Paris.", "Four.", "Blue whale.", "1969."):
        monitor.observe(text, None, "stop", thinking=False)
    assert monitor.rates()["repeated_answers"] == 0.0
    assert monitor.alarms() == []
    monitor.observe("  paris. ", None, "stop", thinking=False)  # same answer, other spacing/case
    assert monitor.rates()["repeated_answers"] == 1 / 5


def test_status_and_live_view_name_the_figure_in_words():
    from regen.display import quality_rates_text

    text = quality_rates_text(QualityMonitor().rates())
    assert "repeated answers 0.0%" in text and "_" not in text


def test_an_answer_key_reads_the_head_of_a_long_answer_as_the_whole_would():
    """A 32K-token answer is keyed from its head (flat cost), to the same key as from the whole,
    whatever the whitespace: runs of it, at the start, across the head's end, or everywhere."""
    import re

    def whole(content: str) -> str:
        return re.sub(r"\s+", " ", content.strip().lower())[:80]

    cases = [
        "Word " * 20_000,
        "\n\n  " + "Mixed\tCase  text " * 5_000,
        " " * 5_000 + "late start " * 100,
        "a" + " " * 400 + "b" * 100,
        "x " * 159 + "   \n" * 1000 + "y",
        " \t " * 10_000,
        "short answer  ",
        "İ" * 500,
    ]
    for content in cases:
        assert answer_key(content) == whole(content), content[:30]
    monitor = QualityMonitor(Thresholds(min_samples=1))
    monitor.observe(" " * 100_000, "   ", "stop", thinking=True)
    assert monitor.rates()["empty"] == 1.0 and monitor.rates()["missing_reasoning"] == 1.0
