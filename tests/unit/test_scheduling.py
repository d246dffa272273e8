"""The longest-first order of test modules under pytest-xdist (tests/scheduling.py)."""

from __future__ import annotations

from tests.scheduling import LONGEST_FIRST, longest_first


def test_listed_modules_go_first_in_their_order_wherever_they_live_and_the_others_keep_theirs() -> None:
    first, second = LONGEST_FIRST[0], LONGEST_FIRST[1]
    scopes = ["tests/a/test_many.py", f"tests/x/{second}", "tests/test_few.py", f"tests/y/z/{first}"]

    assert longest_first(scopes) == [
        f"tests/y/z/{first}",
        f"tests/x/{second}",
        "tests/a/test_many.py",
        "tests/test_few.py",
    ]


def test_every_listed_module_exists_once() -> None:
    from pathlib import Path

    names = [path.name for path in Path(__file__).parents[1].rglob("test_*.py")]
    assert len(set(LONGEST_FIRST)) == len(LONGEST_FIRST)
    assert set(LONGEST_FIRST) <= set(names), set(LONGEST_FIRST) - set(names)
