"""The issue's "done when", end to end on the demo in a real git repository: a pull request that
brings an unjudged document into bm25's top 5 makes the gate say so, with the figure's range, as
"Undecided: judge N document(s)" with the command; judged relevant (through the page, in headless
Chromium, in the slow set), the verdict is a measured one. `unjudged = "warn"` says the same and
holds. The gate runs in this process, as `python -m retrieval` runs it (its command line, its
folder); git, the judging server and the browser in their own."""

from __future__ import annotations

import contextlib
import csv
import io
import json
import os
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest
from browser_fixture import chromium, need_browser, wait_until
from demo_fixture import DEMO_DATA
from judging_fixture import JudgeProcess
from made_once import made_once

from retrieval.cli import main
from retrieval.data.judgment_file import JUDGMENTS_FILE, read_judgments

PROJECT = 'dataset = "data/demo"\nprofile = "local"\nmethods = ["bm25"]\n'
# The pull request: a new document that answers q01 ("J'obtiens HEL-4040 en important mon fichier,
# que faire ?") in its own words, so bm25 puts it first and HEL-4040, the judged answer, second.
NEW = {
    "id": "faq-import-hel-4040",
    "title": "J'obtiens HEL-4040 en important mon fichier : que faire ?",
    "text": "Vous obtenez HEL-4040 en important un fichier : que faire ? Le fichier importé ne respecte pas "
    "le schéma. Que faire quand on obtient HEL-4040 en important : corrigez le fichier, puis importez-le.",
}


# The user's environment may choose a profile or a model: not these tests'.
UNSET = ("RETRIEVAL_PROFILE", "EMBEDDING_MODEL", "MODEL")


@pytest.fixture(autouse=True)
def _no_profile_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in UNSET:
        monkeypatch.delenv(name, raising=False)


def _git(root: Path, *args: str) -> None:
    env = {k: v for k, v in os.environ.items() if k not in UNSET}
    done = subprocess.run(
        ["git", "-c", "user.name=ana", "-c", "user.email=ana@example.invalid", *args],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr


def _retrieval(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """`python -m retrieval ARGS` in the project's folder, run in this process."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.chdir(root), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        status = main(list(args))
    return subprocess.CompletedProcess(["python", "-m", "retrieval", *args], status, out.getvalue(), err.getvalue())


def _gate(root: Path) -> subprocess.CompletedProcess[str]:
    return _retrieval(root, "--gate", "--baseline-ref", "main")


def _main_of(project: str) -> Path:
    """A repository whose main gates bm25 on the demo, with `project` as its project file, on a
    new branch `pull-request`: made once per process (the gate's baseline run and the git calls),
    then copied by each test that asks."""

    def make(base: Path) -> None:
        root = base / "repo"
        (root / "data").mkdir(parents=True)
        shutil.copytree(DEMO_DATA, root / "data" / "demo")
        (root / "retrieval.toml").write_text(project, encoding="utf-8")
        _git(root, "init", "-q", "-b", "main")
        made = _retrieval(root, "--gate", "--update-baseline")
        assert made.returncode == 0, made.stdout + made.stderr
        _git(root, "add", "-A")
        _git(root, "commit", "-q", "-m", "main: bm25 gated on the demo")
        _git(root, "checkout", "-q", "-b", "pull-request")

    return made_once("unjudged-main", project, make) / "repo"


def _pull_request(tmp_path: Path, project: str = PROJECT) -> Path:
    """A repository whose main gates bm25 on the demo (with `project` as its project file), and a
    pull request that adds NEW."""
    root = tmp_path / "repo"
    shutil.copytree(_main_of(project), root, symlinks=True)
    with (root / "data" / "demo" / "corpus.jsonl").open("a", encoding="utf-8") as corpus:
        corpus.write(json.dumps(NEW, ensure_ascii=False) + "\n")
    return root


@pytest.fixture
def pull_request(tmp_path: Path) -> Path:
    return _pull_request(tmp_path)


def _undecided(output: str) -> list[str]:
    return [line for line in output.splitlines() if "ndecided" in line]


def _undecided_until_judged(root: Path, judge: Callable[[Path], None]) -> None:
    """The gate's undecided verdict on the pull request at `root`, `judge` grading q01's new
    document 3 (as ana), and the gate's measured verdict after it."""
    first = _gate(root)
    assert first.returncode == 1, first.stdout + first.stderr
    [line] = [line for line in _undecided(first.stdout) if line.startswith("FAILED bm25-mrr - ")]
    # It entered q01's top 5 first, and q20's fifth; bm25 MRR fell 0.5533 -> 0.5333 with it not relevant,
    # and would be 0.5613 with it relevant: the range, and what to judge.
    assert line.startswith("FAILED bm25-mrr - bm25 mrr fell below the baseline and the baseline of main: ")
    assert (
        "Undecided: judge 2 document(s): the drop rests on the 2 unjudged document(s) that entered its top k, counted "
        "as not relevant (0.5533 -> 0.5333); counted as relevant, 0.5533 -> 0.5613, which holds: "
        "q01 faq-import-hel-4040 (bm25 rank 1), q20 faq-import-hel-4040 (bm25 rank 5). "
        "Judge them with `python -m retrieval judge --baseline-ref main`"
    ) in line
    judge(root)
    judged = read_judgments(root / "data" / "demo" / JUDGMENTS_FILE)
    assert [(j.question, j.document, j.grade, j.source) for j in judged] == [("q01", NEW["id"], 3, "human:ana")]
    # Measured now: q01's new document is relevant on both sides (the base branch's figure of q01
    # recomputed from its top 10 under the new judgment), and bm25 MRR holds.
    second = _gate(root)
    assert _undecided(second.stdout) == []
    failed = [line.split(" - ")[0] for line in second.stdout.splitlines() if line.startswith("FAILED")]
    assert failed == ["FAILED dataset", "FAILED bm25-top-10"], second.stdout
    assert "judgments added for documents nobody had judged, on 1 question(s) (q01)" in second.stdout


def _judged_in_the_line_format(root: Path) -> None:
    """q01's new document graded 3 by ana, the line the judging page writes (test_judging_page.py)."""
    line = {"question": "q01", "document": NEW["id"], "grade": 3, "source": "human:ana", "date": "2026-12-01T09:00:00Z"}
    (root / "data" / "demo" / JUDGMENTS_FILE).write_text(json.dumps(line) + "\n", encoding="utf-8")


def test_an_unjudged_document_in_the_top_5_is_undecided_until_judged(pull_request: Path) -> None:
    _undecided_until_judged(pull_request, _judged_in_the_line_format)


@pytest.mark.slow  # a real judging server and Chromium
def test_an_unjudged_document_in_the_top_5_is_undecided_until_judged_on_the_page(
    pull_request: Path, tmp_path: Path
) -> None:
    need_browser()

    def on_the_page(root: Path) -> None:
        # Judged relevant through the page, with its filter on what this pull request needs.
        server = JudgeProcess(root, "--judge", "ana", "--baseline-ref", "main")
        try:
            with chromium(tmp_path / "profile") as browser:
                page = browser.new_page()
                page.goto(server.url)
                page.wait_for_selector("#pair:not([hidden])")
                assert page.inner_text("#needed-count") == "2"
                page.check("#needed")
                wait_until(
                    lambda: page.inner_text("#count") == "0 of 2 judged", "the filter on the pull request's pairs"
                )
                assert (page.inner_text("#question-id"), page.inner_text("#candidate-id")) == ("q01", NEW["id"])
                page.keyboard.press("3")
                wait_until(lambda: page.inner_text("#count") == "1 of 2 judged", "the grade saved")
        finally:
            server.stop()

    _undecided_until_judged(pull_request, on_the_page)


def test_unjudged_warn_says_it_and_holds_only_where_the_base_branch_sets_it(pull_request: Path, tmp_path: Path) -> None:
    # The pull request alone cannot let pass what its base branch fails: against main, still undecided.
    root = pull_request
    (root / "retrieval.toml").write_text(PROJECT + 'unjudged = "warn"\n', encoding="utf-8")
    gated = _gate(root)
    [line] = [line for line in gated.stdout.splitlines() if line.startswith("FAILED bm25-mrr - ")]
    assert line.startswith("FAILED bm25-mrr - bm25 mrr fell below the baseline of main: ")
    assert "Undecided: judge 2 document(s)" in line
    # Set on the base branch too: said, and the item holds.
    root = _pull_request(tmp_path / "warned", PROJECT + 'unjudged = "warn"\n')
    gated = _gate(root)
    assert not [line for line in gated.stdout.splitlines() if line.startswith("FAILED bm25-mrr")], gated.stdout
    assert (
        "undecided (unjudged = warn): bm25 mrr fell only with 2 unjudged document(s) counted as not relevant: "
        "judge them with `python -m retrieval judge --baseline-ref main`"
    ) in gated.stdout


def _llm_graded(root: Path) -> None:
    """An LLM's grades (a FIXTURE judge's lines) for the pull request's new document, on both questions."""
    lines = [
        {
            "question": q,
            "document": NEW["id"],
            "grade": 3,
            "source": "llm:fixture-model",
            "date": "2026-12-01T10:00:00Z",
        }
        for q in ("q01", "q20")
    ]
    text = "".join(json.dumps(line) + "\n" for line in lines)
    (root / "data" / "demo" / JUDGMENTS_FILE).write_text(text, encoding="utf-8")


def test_llm_grades_count_against_the_base_branch_only_where_it_accepts_them(tmp_path: Path) -> None:
    # The pull request turns accept_llm_judgments on and brings an LLM's grades of the new
    # document: against main, which refuses them, they are still holes and the drop is undecided.
    root = _pull_request(tmp_path / "refused")
    (root / "retrieval.toml").write_text(PROJECT + "accept_llm_judgments = true\n", encoding="utf-8")
    _llm_graded(root)
    gated = _gate(root)
    [line] = [line for line in gated.stdout.splitlines() if line.startswith("FAILED bm25-mrr - ")]
    assert line.startswith("FAILED bm25-mrr - bm25 mrr fell below the baseline of main: "), gated.stdout
    assert "Undecided: judge 2 document(s)" in line
    assert (
        "; main refuses LLM judgments (its accept_llm_judgments): compared with it, the 2 pair(s) only an LLM "
        "graded are unjudged"
    ) in gated.stdout
    # And the judging command offers those pairs to people, as what this pull request needs.
    exported = _retrieval(root, "judge", "--export", "pool.csv", "--baseline-ref", "main")
    assert exported.returncode == 0, exported.stderr
    with (root / "pool.csv").open(encoding="utf-8-sig", newline="") as sheet:
        needed = sorted((r["question_id"], r["document_id"]) for r in csv.DictReader(sheet) if r["needed"] == "yes")
    assert needed == [("q01", NEW["id"]), ("q20", NEW["id"])]
    # Accepted on the base branch too: the LLM's grades fill the holes on both sides, and bm25 MRR holds.
    root = _pull_request(tmp_path / "accepted", PROJECT + "accept_llm_judgments = true\n")
    _llm_graded(root)
    gated = _gate(root)
    assert not [line for line in gated.stdout.splitlines() if line.startswith("FAILED bm25-mrr")], gated.stdout
    assert _undecided(gated.stdout) == [], gated.stdout
    assert "refuses LLM judgments" not in gated.stdout
