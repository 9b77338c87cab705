"""The command line as a user meets it: report on stdout, run log, JSON, one-line errors."""

from __future__ import annotations

import gc
import json
import shutil
from pathlib import Path

import pytest

from retrieval.cli import main
from retrieval.config import load_settings
from retrieval.data.dataset import load_dataset
from retrieval.evaluation.evaluate import evaluate
from retrieval.gate.accept import accept
from retrieval.gate.result import run_gate
from retrieval.measures.metrics import score_run

FIXTURES = Path(__file__).parent / "fixtures"


@pytest.fixture(autouse=True)
def _in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # No project file here: the built-in defaults apply, and nothing is written to the repo.
    monkeypatch.chdir(tmp_path)


def test_beir_folder_with_bm25_needs_no_model_server(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code = main(["--dataset", str(FIXTURES / "fixture_beir"), "--methods", "bm25", "--log", "run.jsonl"])
    out = capsys.readouterr().out
    assert code == 0
    assert "| Method | Recall@5 | MRR | Recall@5 all |" in out
    lines = out.splitlines()
    assert lines[4].startswith("| bm25 | ") and lines[5] == ""
    log = (tmp_path / "run.jsonl").read_text().splitlines()
    assert json.loads(log[0])["methods"] == ["bm25"]
    assert {json.loads(line)["question"] for line in log[1:]} == {"b1", "b2"}


def test_from_a_subfolder_the_project_root_gives_the_dataset_and_settings(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # FIXTURE project: its own data and settings, none of this repository's.
    shutil.copytree(FIXTURES / "fixture_native", tmp_path / "data" / "qa")
    (tmp_path / "pyproject.toml").write_text(
        '[project]\nname = "adopter"\n\n[tool.retrieval]\ndataset = "data/qa"\nmethods = ["bm25"]\nk = 2\n'
    )
    (tmp_path / "tests" / "unit").mkdir(parents=True)
    monkeypatch.chdir(tmp_path / "tests" / "unit")
    assert main(["--format", "json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert list(report["scores"]) == ["bm25"] and report["k"] == 2
    settings = load_settings(tmp_path)
    expected = score_run(evaluate(load_dataset(settings.dataset), settings), settings.k)
    assert report["scores"]["bm25"]["overall"] == pytest.approx(expected["bm25"].overall, abs=1e-12)


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--dataset", "missing-folder"], "missing-folder: not a folder"),
        (["--profile", "nope", "--dataset", str(FIXTURES / "fixture_native")], "unknown profile 'nope'"),
        (["--methods", "bm25,typo", "--dataset", str(FIXTURES / "fixture_native")], "unknown method 'typo'"),
        (["--dataset", str(FIXTURES / "fixture_native"), "--methods", "vector"], "no cassette"),
    ],
)
def test_errors_are_one_line_with_exit_code_2(
    args: list[str], expected: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(args) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and expected in err
    assert err.count("\n") == 1 and "Traceback" not in err


def test_invalid_dataset_names_file_and_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = tmp_path / "bad"
    data.mkdir()
    (data / "corpus.jsonl").write_text('{"id": "a", "title": "t", "text": "x"}\n{"id": "a", "text": "y"}\n')
    (data / "questions.jsonl").write_text('{"id": "q", "text": "?", "type": "t", "relevant": ["a"]}\n')
    assert main(["--dataset", str(data), "--methods", "bm25"]) == 2
    assert f"{data / 'corpus.jsonl'}:2: duplicate document id" in capsys.readouterr().err


PLUGIN = '''
import numpy as np
from retrieval import top_k


class ReverseBM25:
    """Reads bm25's rankings from the context and reverses them (a fixture retriever)."""

    name = "reverse-bm25"
    requires = ("bm25",)
    needs_vectors = False

    def rank(self, context):
        rankings = []
        for bm25 in context.rankings["bm25"]:
            scores = np.zeros(len(context.dataset.documents))
            scores[bm25.indices] = np.arange(len(bm25.indices))  # later in bm25 = better here
            rankings.append(top_k(scores, context.depth))
        return rankings


def factory(settings):
    return ReverseBM25()
'''


def test_user_retriever_plugs_in_as_module_factory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "my_retriever.py").write_text(PLUGIN)
    monkeypatch.syspath_prepend(str(tmp_path))
    code = main(
        ["--dataset", str(FIXTURES / "fixture_native"), "--methods", "my_retriever:factory", "--format", "json"]
    )
    assert code == 0
    report = json.loads(capsys.readouterr().out)
    # Reported under the name the method gives itself; bm25 ran because it requires it, but is not reported.
    assert list(report["scores"]) == ["reverse-bm25"]
    assert report["config"]["profile"] == "local"


def test_a_saved_run_log_is_reported_again_without_any_model(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    log = tmp_path / "run.jsonl"
    native = str(FIXTURES / "fixture_native")
    assert main(["--dataset", native, "--methods", "bm25", "--log", str(log), "--output", "first.md"]) == 0
    # No method runs: --from-log reports the saved rankings (its own methods, k and candidates).
    assert main(["--dataset", native, "--methods", "vector", "--from-log", str(log)]) == 0
    assert capsys.readouterr().out == (tmp_path / "first.md").read_text()


def test_the_job_summary_copy_is_the_markdown_report_when_it_fits(tmp_path: Path) -> None:
    native = str(FIXTURES / "fixture_native")
    args = ["--dataset", native, "--methods", "bm25", "--format", "json", "--output", "report.json"]
    assert main([*args, "--summary-output", "job.md", "--log", "run.jsonl"]) == 0
    # The markdown report of that same run, from its log: the same wall-clock seconds, so the
    # comparison is exact and does not depend on how long a second run would take.
    assert main(["--dataset", native, "--from-log", "run.jsonl", "--output", "report.md"]) == 0
    assert "| Time this run (s) |" in (tmp_path / "report.md").read_text()
    assert (tmp_path / "job.md").read_text() == (tmp_path / "report.md").read_text()
    assert json.loads((tmp_path / "report.json").read_text())["scores"]["bm25"]  # --format applies to --output


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--methods", "bm25", "--output", "."], "error: cannot write or read"),
        (["--methods", "bm25", "--baseline", "missing.json"], "missing.json: no such baseline file"),
        (["--methods", "bm25", "--from-log", "corpus.jsonl"], "corpus.jsonl:1: not a run log"),
    ],
)
def test_file_errors_are_one_line(
    args: list[str], expected: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # A copy: a failed write may leave nothing behind, but it is tried in the current folder.
    shutil.copytree(FIXTURES / "fixture_native", tmp_path, dirs_exist_ok=True)
    monkeypatch.chdir(tmp_path)
    assert main(["--dataset", ".", *args]) == 2
    err = capsys.readouterr().err
    assert expected in err and err.count("\n") == 1


def test_from_log_refuses_a_log_of_another_dataset(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = tmp_path / "beir.jsonl"
    assert main(["--dataset", str(FIXTURES / "fixture_beir"), "--methods", "bm25", "--log", str(log)]) == 0
    capsys.readouterr()
    assert main(["--dataset", str(FIXTURES / "fixture_native"), "--from-log", str(log)]) == 2
    assert "written for dataset fixture_beir" in capsys.readouterr().err


def test_a_baseline_of_another_configuration_is_flagged_in_the_report(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    # FIXTURE project with a baseline made here, at BM25 k1 1.5; the report runs from a subfolder.
    shutil.copytree(FIXTURES / "fixture_native", tmp_path / "data" / "qa")
    project = 'dataset = "data/qa"\nmethods = ["bm25"]\n'
    (tmp_path / "retrieval.toml").write_text(project)
    accept(run_gate(load_settings(tmp_path)))
    (tmp_path / "docs").mkdir()
    monkeypatch.chdir(tmp_path / "docs")
    # A setting bm25 does not read (hybrid's rrf_k) is no change of its configuration...
    assert main(["--rrf-k", "5", "--baseline"]) == 0
    assert "Note:" not in capsys.readouterr().out
    # ... one it reads is named, and the changes shown are what it moved.
    (tmp_path / "retrieval.toml").write_text(project + "bm25_k1 = 1.2\n")
    assert main(["--baseline"]) == 0
    out = capsys.readouterr().out
    assert (
        "> **Note:** the baseline was made with another configuration (bm25.k1: 1.5 -> 1.2): the changes shown "
        "are what this configuration moved." in out
    )
    # A question removed: the note says so, and what the gate compares.
    (tmp_path / "retrieval.toml").write_text(project)
    path = tmp_path / "data" / "qa" / "questions.jsonl"
    rows = path.read_text().splitlines()
    path.write_text("\n".join(rows[:-1]) + "\n")
    assert main(["--baseline"]) == 0
    removed = json.loads(rows[-1])["id"]
    note = (
        f"the dataset changed since the baseline (1 removed ({removed})): the changes shown compare this run's "
        "figures with the baseline's, each on its own questions (the gate compares the 2 questions both hold)."
    )
    assert f"> **Note:** {note}" in capsys.readouterr().out
    assert main(["--baseline", "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["notice"] == note  # said to machines too
    # Every question reworded: the same questions by id, compared under the baseline's judgments.
    path.write_text("".join(json.dumps({**json.loads(r), "text": json.loads(r)["text"] + " ?"}) + "\n" for r in rows))
    assert main(["--baseline"]) == 0
    assert "questions (the gate compares the 3 edited question(s) under the baseline's judgments)." in (
        capsys.readouterr().out
    )
    # Not one question id the same: not comparable at all.
    path.write_text("".join(json.dumps({**json.loads(r), "id": json.loads(r)["id"] + "-new"}) + "\n" for r in rows))
    assert main(["--baseline"]) == 0
    assert "> **Note:** the changes shown are against a baseline that is not comparable: the dataset changed" in (
        capsys.readouterr().out
    )


def test_zero_workers_is_a_one_line_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--dataset", str(FIXTURES / "fixture_native"), "--workers", "0"]) == 2
    assert capsys.readouterr().err == "error: --workers must be at least 1, got 0.\n"


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["--allow-regression", "why"], "--allow-regression only applies with --update-baseline."),
        (["--gate", "--allow-regression", "why"], "--allow-regression only applies with --update-baseline."),
        (["--update-baseline"], "--update-baseline applies with --gate (the gate decides what may be written)."),
    ],
)
def test_an_acceptance_is_refused_without_the_update_it_belongs_to(
    argv: list[str], said: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as caught:
        main(argv)
    assert caught.value.code == 2
    assert capsys.readouterr().err.splitlines()[-1] == f"python -m retrieval: error: {said}"


def test_the_command_leaves_the_cycle_collector_as_it_found_it(capsys: pytest.CaptureFixture[str]) -> None:
    # The command loads without the collector and freezes its loaded dataset out of the collector's
    # passes (retrieval.data.records, retrieval.cli): a longer process calling main() gets both back.
    args = ["--dataset", str(FIXTURES / "fixture_beir"), "--methods", "bm25", "--format", "json"]
    assert gc.isenabled() and gc.get_freeze_count() == 0
    assert main(args) == 0
    assert gc.isenabled() and gc.get_freeze_count() == 0
    assert json.loads(capsys.readouterr().out)["questions"] == 2
    gc.disable()
    try:
        assert main(args) == 0
        assert not gc.isenabled() and gc.get_freeze_count() == 0
    finally:
        gc.enable()
