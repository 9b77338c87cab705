"""The judging page in a real browser (Debian's Chromium, headless, through Playwright): keys 0-3
grade and each grade is in judgments.jsonl before the page moves on, undo puts back what a grade
replaced, a reload carries on where the tab was (its undo too), and two tabs lose nothing of each
other's. The server is a real `python -m retrieval judge` process on 127.0.0.1."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from browser_fixture import chromium, need_browser, wait_until
from judging_fixture import JudgeProcess, copy_demo

from retrieval.data.analyzer import analyze
from retrieval.data.judgment_file import JUDGMENTS_FILE, Judgment, read_judgments

# A real browser and server process (8-12 s): CI's slow job. The session and server they drive are
# tested without a browser in test_judging_page.py (grades on disk, undo, another tab's grade).
pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("browser_available")]


@pytest.fixture
def browser_available() -> None:
    need_browser()


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[JudgeProcess, Path]]:
    root = copy_demo(tmp_path / "project")
    server = JudgeProcess(root, "--judge", "ana", "--methods", "bm25")
    try:
        yield server, root / "data" / "demo" / JUDGMENTS_FILE
    finally:
        server.stop()


def _lines(path: Path) -> list[Judgment]:
    return read_judgments(path) if path.exists() else []


def _shown(page: object) -> tuple[str, str]:
    return (page.inner_text("#question-id"), page.inner_text("#candidate-id"))  # type: ignore[attr-defined]


def _count(page: object) -> str:
    return page.inner_text("#count")  # type: ignore[attr-defined]


def test_grading_undo_and_a_reload_in_the_browser(served: tuple[JudgeProcess, Path], tmp_path: Path) -> None:
    server, path = served
    with chromium(tmp_path / "profile") as browser:
        page = browser.new_page()
        errors: list[str] = []
        page.on("pageerror", lambda error: errors.append(str(error)))
        page.goto(server.url)
        page.wait_for_selector("#pair:not([hidden])")
        total = int(_count(page).split(" of ")[1].split()[0])
        assert _count(page) == f"0 of {total} judged" and total > 80
        first = _shown(page)
        # The question's analysed terms are what is marked in the candidate (the project's analyzer).
        terms = set(page.inner_text("#terms").split(", "))
        marks = page.locator("#candidate-text mark").all_inner_texts()
        assert all(set(analyze(mark)) & terms for mark in marks)
        page.keyboard.press("2")
        wait_until(lambda: _shown(page) != first, "the next pair")
        assert [(j.question, j.document, j.grade, j.source) for j in _lines(path)] == [(*first, 2, "human:ana")]
        assert _count(page) == f"1 of {total} judged"
        assert page.inner_text("#status") == f"saved {first[0]} / {first[1]}: 2"
        # Undo: the grade is gone from the file, the pair is back on screen, unjudged.
        page.keyboard.press("u")
        wait_until(lambda: _shown(page) == first, "the undone pair")
        assert _lines(path) == []
        wait_until(lambda: page.inner_text("#current") == "not judged yet", "the pair shown unjudged")
        assert _count(page) == f"0 of {total} judged"
        # Two grades, then a reload mid-way: the tab carries on after them, and can still undo.
        page.keyboard.press("1")
        wait_until(lambda: _shown(page) != first, "the second pair")
        second = _shown(page)
        page.keyboard.press("3")
        wait_until(lambda: _shown(page) != second, "the third pair")
        third = _shown(page)
        page.reload()
        page.wait_for_selector("#pair:not([hidden])")
        wait_until(lambda: _count(page) == f"2 of {total} judged", "the count after the reload")
        assert _shown(page) == third
        page.keyboard.press("u")
        wait_until(lambda: _shown(page) == second, "the second pair, undone after the reload")
        assert {(j.question, j.document, j.grade) for j in _lines(path)} == {(*first, 1)}
        # Back to the first pair, judged again, undone: its earlier grade is what comes back.
        page.keyboard.press("ArrowLeft")
        wait_until(lambda: _shown(page) == first, "the first pair again")
        assert page.inner_text("#current").startswith("judged 1 by human:ana on ")
        # An undo typed while the grade is still being saved undoes that grade once saved.
        page.keyboard.press("0")
        page.keyboard.press("u")
        wait_until(lambda: {(j.question, j.document, j.grade) for j in _lines(path)} == {(*first, 1)}, "the grade back")
        wait_until(lambda: page.inner_text("#status") == f"undone {first[0]} / {first[1]}: back to 1", "the undo said")
        assert errors == []


def test_two_tabs_lose_nothing_of_each_other(served: tuple[JudgeProcess, Path], tmp_path: Path) -> None:
    server, path = served
    with chromium(tmp_path / "profile") as browser:
        one, two = browser.new_page(), browser.new_page()
        for tab in (one, two):
            tab.goto(server.url)
            tab.wait_for_selector("#pair:not([hidden])")
        first = _shown(one)
        assert _shown(two) == first
        one.keyboard.press("1")
        wait_until(lambda: _shown(one) != first, "tab one's next pair")
        # The other tab moves past what the first judged (it reads the file every 2 s), and says so.
        wait_until(lambda: _shown(two) != first, "tab two to move past the pair tab one judged")
        assert "was judged meanwhile" in two.inner_text("#status")
        second = _shown(two)
        two.keyboard.press("2")
        wait_until(lambda: _shown(two) != second, "tab two's next pair")
        assert {(j.question, j.document, j.grade) for j in _lines(path)} == {(*first, 1), (*second, 2)}
        # Tab two goes back and judges tab one's pair again: tab one's undo no longer takes it back.
        two.keyboard.press("ArrowLeft")
        two.keyboard.press("ArrowLeft")
        wait_until(lambda: _shown(two) == first, "tab two back on the first pair")
        two.keyboard.press("3")
        wait_until(lambda: {(j.question, j.document, j.grade) for j in _lines(path)} >= {(*first, 3)}, "the new grade")
        one.keyboard.press("u")
        wait_until(lambda: "not undone" in one.inner_text("#status"), "tab one's refused undo")
        assert "judged again since (another tab?): nothing undone, nothing lost" in one.inner_text("#status")
        assert {(j.question, j.document, j.grade) for j in _lines(path)} == {(*first, 3), (*second, 2)}
        one.screenshot(path=str(tmp_path / "judging-page.png"))
        assert (tmp_path / "judging-page.png").stat().st_size > 10_000
