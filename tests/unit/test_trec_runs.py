"""TREC run files: every method's run and the qrels exported for trec_eval, ir_measures and ranx
(ir_measures reads the export and gets the report's figures), a run gated as a method
(`trec:PATH`, `--run FILE`, its digest in the configuration), the round trip, and a bad run
refused in one line naming the file and the line."""

from __future__ import annotations

import hashlib
from dataclasses import replace
from pathlib import Path

import ir_measures
import pytest
from demo_fixture import DEMO_PROJECT, demo_dataset, demo_settings
from ir_measures import RR, R, nDCG

from retrieval import TrecRunError, read_trec_run, trec_files  # the public API's names
from retrieval.cli import main
from retrieval.config import ConfigError
from retrieval.data.dataset import Dataset
from retrieval.evaluation.evaluate import evaluate
from retrieval.measures.metrics import score_run
from retrieval.run.results import Run
from retrieval.run.trec import QRELS_FILE, judgments

METHODS = ["bm25", "vector", "hybrid"]
MEASURES = {R @ 5: "recall@5", RR @ 10: "mrr", nDCG @ 10: "ndcg@10"}


@pytest.fixture(scope="module")
def demo_run() -> Run:
    return evaluate(demo_dataset(), demo_settings(), mode="replay", methods=METHODS)


@pytest.fixture(scope="module")
def exported(demo_run: Run, tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("export")
    for name, data in trec_files(demo_run).items():
        (folder / name).write_bytes(data)
    return folder


def test_the_export_holds_every_methods_run_and_the_qrels(demo_run: Run, exported: Path) -> None:
    assert sorted(p.name for p in exported.iterdir()) == ["bm25.run", "hybrid.run", QRELS_FILE, "vector.run"]
    qrels = (exported / QRELS_FILE).read_text().splitlines()
    questions = demo_dataset().questions
    assert qrels == [f"{q.id} 0 {d} 1" for q in questions for d in q.relevant]
    assert all(judgments(q) == dict.fromkeys(q.relevant, 1) for q in questions)
    lines = (exported / "hybrid.run").read_text().splitlines()
    first = demo_run.results[0]
    kept = first.methods["hybrid"].ids
    assert lines[: len(kept)] == [
        f"{first.question.id} Q0 {d} {r} {len(kept) - r + 1} hybrid" for r, d in enumerate(kept, 1)
    ]
    assert len(lines) == sum(len(r.methods["hybrid"].ids) for r in demo_run.results)


def test_ir_measures_reads_the_export_and_gets_the_reports_figures(demo_run: Run, exported: Path) -> None:
    ours = score_run(demo_run, k=5, extra=True)
    qrels = list(ir_measures.read_trec_qrels(str(exported / QRELS_FILE)))
    for method in METHODS:
        run = list(ir_measures.read_trec_run(str(exported / f"{method}.run")))
        per_question = list(ir_measures.iter_calc(list(MEASURES), qrels, run))
        assert len(per_question) == len(MEASURES) * len(demo_run.results)  # every question ranked
        for value in per_question:
            expected = ours[method].per_question[value.query_id][MEASURES[value.measure]]
            assert value.value == pytest.approx(expected, abs=1e-12), (method, value)
        aggregate = ir_measures.calc_aggregate(list(MEASURES), qrels, run)
        for measure, name in MEASURES.items():
            assert aggregate[measure] == pytest.approx(ours[method].overall[name], abs=1e-12)
    # The figures differ between methods: the comparison is not of one run with itself.
    assert len({round(ours[m].overall["mrr"], 6) for m in METHODS}) == 3


def test_a_run_exported_and_re_imported_gives_the_same_figures(demo_run: Run, exported: Path) -> None:
    specs = [f"trec:{exported / f'{m}.run'}" for m in METHODS]
    again = evaluate(demo_dataset(), demo_settings(), mode="replay", methods=specs)
    assert again.methods == ["bm25-run", "vector-run", "hybrid-run"]
    ours, theirs = score_run(demo_run, k=5, extra=True), score_run(again, k=5, extra=True)
    for method in METHODS:
        assert theirs[f"{method}-run"].per_question == ours[method].per_question
        assert theirs[f"{method}-run"].by_type == ours[method].by_type
        kept = again.ranked_ids(f"{method}-run")
        assert {q: ids[: len(kept[q])] for q, ids in demo_run.ranked_ids(method).items()} == kept
    assert again.declared("hybrid-run").calls == "none" and again.declared("hybrid-run").first_stage


def test_the_runs_digest_is_in_the_configuration(exported: Path, tmp_path: Path) -> None:
    path = tmp_path / "engine.trec"
    path.write_bytes((exported / "vector.run").read_bytes())
    settings = demo_settings(root=str(tmp_path))
    run = evaluate(demo_dataset(), settings, mode="replay", methods=["trec:engine.trec"])

    assert run.methods == ["engine"]
    assert run.config["engine.file"] == "engine.trec"
    assert run.config["engine.sha256"] == hashlib.sha256(path.read_bytes()).hexdigest()
    path.write_text(path.read_text().replace(" vector\n", " vector-v2\n"), encoding="utf-8")
    changed = evaluate(demo_dataset(), settings, mode="replay", methods=["trec:engine.trec"])
    assert changed.config["engine.sha256"] != run.config["engine.sha256"]
    assert score_run(changed)["engine"].overall == score_run(run)["engine"].overall


def small() -> Dataset:
    demo = demo_dataset()
    return replace(demo, questions=demo.questions[:2])


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "engine.run"
    path.write_text(text, encoding="utf-8")
    return path


GOOD = "q01 Q0 HEL-4040 1 2.5 e\nq02 Q0 HEL-4120 1 1.0 e\n"


def test_tied_scores_are_read_as_trec_eval_reads_them(tmp_path: Path) -> None:
    # q01: three documents tie; trec_eval puts tied documents in decreasing id order.
    text = "q01 Q0 HEL-4010 1 1.0 e\nq01 Q0 HEL-4040 2 1.0 e\nq01 Q0 HEL-4020 3 1.0 e\nq01 Q0 proc-restauration 4 3 e\n"
    path = write(tmp_path, text + "q02 Q0 HEL-4120 9 1.0 e\nq99 Q0 not-a-document 1 1 e\n")
    run = read_trec_run(path, small())
    assert [d for d, _ in run.rankings["q01"]] == ["proc-restauration", "HEL-4040", "HEL-4020", "HEL-4010"]
    assert set(run.rankings) == {"q01", "q02"}  # q99 is no question of the dataset: left out
    qrels = [ir_measures.Qrel(q.id, d, g) for q in small().questions for d, g in judgments(q).items()]
    scored = list(ir_measures.read_trec_run(str(path)))
    # trec_eval (through pytrec_eval) puts HEL-4040 second, as read here; ir_measures' own RR@10
    # breaks the tie the other way (increasing ids): tied scores are read differently by each tool,
    # which is why an exported run has none.
    (trec_eval,) = [m for m in ir_measures.pytrec_eval.iter_calc([RR], qrels, scored) if m.query_id == "q01"]
    (own,) = [m for m in ir_measures.iter_calc([RR @ 10], qrels, scored) if m.query_id == "q01"]
    assert (trec_eval.value, own.value) == (1 / 2, 1 / 4)


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("q01 Q0 HEL-4040 1 2.5\n", "engine.run:1: 5 field(s); a run line has 6: qid Q0 docid rank score tag"),
        (GOOD + "q01 Q0 HEL-4010 2 high e\n", "engine.run:3: score 'high' is not a finite number"),
        (GOOD + "q01 Q0 HEL-4010 2 nan e\n", "engine.run:3: score 'nan' is not a finite number"),
        (GOOD + "q01 Q0 HEL-4010 two 1 e\n", "engine.run:3: rank 'two' is not an integer"),
        ("\n" + GOOD + "q02 Q0 HEL-9999 2 0.5 e\n", "engine.run:4: document 'HEL-9999' is not in the corpus of demo"),
        (GOOD + "q01 Q0 HEL-4040 2 0.5 e\n", "engine.run:3: document 'HEL-4040' ranked twice for question q01"),
        ("q01 Q0 HEL-4040 1 2.5 e\n", "engine.run: no line ranks question q02 of demo: a run ranks every question"),
        (b"q01 Q0 \xff 1 1 e\n", "engine.run: not UTF-8 text (byte 7)"),
    ],
)
def test_a_bad_run_is_refused_in_one_line_naming_the_file_and_line(
    tmp_path: Path, text: str | bytes, says: str
) -> None:
    path = tmp_path / "engine.run"
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    with pytest.raises(TrecRunError) as caught:
        read_trec_run(path, small())
    assert str(caught.value).startswith(f"{path}") and says in str(caught.value) and "\n" not in str(caught.value)


def test_the_cli_gates_a_run_file_and_exports(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(DEMO_PROJECT)
    export = tmp_path / "export"
    assert main(["--methods", "bm25,vector", "--export-trec", str(export), "--format", "json"]) == 0
    capsys.readouterr()
    bad = write(tmp_path, GOOD)  # two questions of 25
    assert main(["--methods", "bm25", "--run", str(bad)]) == 2
    err = capsys.readouterr().err.strip()
    assert err == (
        f"error: {bad}: no line ranks question q03 and 22 more of demo: a run ranks every question of the "
        "dataset; make the run with its questions and their ids (queries.jsonl or questions.jsonl)."
    )
    assert main(["--methods", "bm25", "--run", str(export / "bm25.run"), "--output", str(tmp_path / "r.md")]) == 0
    rows = [line for line in (tmp_path / "r.md").read_text().splitlines() if line.startswith("| bm25")]
    assert rows[0].split("|")[2:4] == rows[1].split("|")[2:4] and rows[1].startswith("| bm25-run |")


def test_a_missing_run_file_is_a_configuration_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"method 'trec:nothing.run': cannot read the run file"):
        evaluate(demo_dataset(), demo_settings(root=str(tmp_path)), mode="replay", methods=["trec:nothing.run"])


def test_graded_judgments_are_exported_with_their_grades(tmp_path: Path) -> None:
    """Graded qrels (grades 0 to 3) go out as they are: ir_measures' graded nDCG@10 on the export
    is the report's; recall and MRR at relevant_grade 2 are ir_measures' R(rel=2) and RR(rel=2)."""
    from retrieval.data.judgments import Question

    demo = demo_dataset()
    ids = [d.id for d in demo.documents]
    questions = []
    for n, q in enumerate(demo.questions):
        grades: tuple[tuple[str, int], ...] = (
            (q.relevant[0], 3),
            (ids[(7 * n) % len(ids)], 2),
            (ids[(11 * n + 3) % len(ids)], 1),
        )
        grades = (*dict(grades).items(), (ids[(5 * n + 1) % len(ids)], 0))
        relevant = tuple(d for d, g in dict(grades).items() if g >= 2)
        questions.append(Question(q.id, q.text, q.type, relevant, tuple(dict(grades).items())))
    graded = replace(demo, questions=tuple(questions))
    run = evaluate(graded, demo_settings(), mode="replay", methods=METHODS)
    files = trec_files(run)
    qrels_lines = files[QRELS_FILE].decode().splitlines()
    assert qrels_lines[:2] == [f"q01 0 {d} {g}" for d, g in questions[0].grades[:2]]
    assert {line.split()[3] for line in qrels_lines} == {"0", "1", "2", "3"}
    for name, data in files.items():
        (tmp_path / name).write_bytes(data)
    ours = score_run(run, k=5, extra=True)
    qrels = list(ir_measures.read_trec_qrels(str(tmp_path / QRELS_FILE)))
    measures = {nDCG @ 10: "ndcg@10", R(rel=2) @ 5: "recall@5", RR(rel=2) @ 10: "mrr"}
    for method in METHODS:
        scored = list(ir_measures.read_trec_run(str(tmp_path / f"{method}.run")))
        for value in ir_measures.iter_calc(list(measures), qrels, scored):
            expected = ours[method].per_question[value.query_id][measures[value.measure]]
            assert value.value == pytest.approx(expected, abs=1e-12), (method, value)
