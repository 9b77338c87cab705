"""Graded judgments: grades kept from BEIR scores and native mappings (0: judged not relevant,
told apart from never judged), graded nDCG@10 equal to ir_measures' on random graded runs,
recall and MRR from `relevant_grade` on, the qrels file chosen by `split`, and the grades in the
fingerprint, the run log and the baseline's judgments only when they say more than the ids."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import ir_measures
import numpy as np
import pytest
from ir_measures import RR, R, nDCG

from retrieval.config import Settings, load_settings
from retrieval.data.dataset import DatasetError, Question, load_dataset
from retrieval.gate.questions import under_judgments
from retrieval.gate.schema import judgments, question_digests
from retrieval.measures.metrics import ndcg_at_k, score_method, score_run
from retrieval.run.results import MethodResult, QuestionResult, Run, load_run, save_run

FIXTURES = Path(__file__).parent / "fixtures"
BEIR = FIXTURES / "fixture_beir"
NO_ENV: dict[str, str] = {}


def _graded_runs(seed: int = 7) -> tuple[dict[str, list[str]], dict[str, dict[str, int]]]:
    """300 questions over 400 documents: up to 20 judged documents each, grades 0 to 3, runs of
    random depth (some judged documents never retrieved)."""
    rng = np.random.default_rng(seed)
    docs = [f"d{i}" for i in range(400)]
    ranked, judged = {}, {}
    for q in range(300):
        qid = f"q{q}"
        chosen = rng.choice(400, size=int(rng.integers(1, 21)), replace=False)
        grades = {docs[i]: int(rng.integers(0, 4)) for i in chosen}
        if not any(grades.values()):
            grades[docs[int(chosen[0])]] = int(rng.integers(1, 4))
        judged[qid] = grades
        # Judged documents put near the top more often than chance, so every gain and rank occurs.
        order = [docs[i] for i in rng.permutation(400)]
        favoured = [d for d in grades if rng.random() < 0.6]
        order = favoured + [d for d in order if d not in favoured]
        ranked[qid] = order[: int(rng.integers(3, 60))] if q % 3 == 0 else order
    return ranked, judged


def _scored(ranked: dict[str, list[str]], depth: int | None = None) -> list[ir_measures.ScoredDoc]:
    return [
        ir_measures.ScoredDoc(q, d, float(len(ids) - r)) for q, ids in ranked.items() for r, d in enumerate(ids[:depth])
    ]


def test_graded_ndcg_recall_and_mrr_equal_ir_measures_on_random_graded_runs() -> None:
    ranked, judged = _graded_runs()
    qrels = [ir_measures.Qrel(q, d, g) for q, grades in judged.items() for d, g in grades.items()]
    types = {q: "all" for q in judged}
    # ir_measures is given each run's top 10, all that nDCG@10, R@5 and RR@10 read (scores are
    # distinct, the ideal DCG comes from the qrels): the same figures as the whole runs, without
    # 80,000 scored documents built and read three times. Ours reads the whole runs.
    scored = _scored(ranked, depth=10)
    for least in (1, 2, 3):
        relevant = {q: [d for d, g in grades.items() if g >= least] or ["none"] for q, grades in judged.items()}
        ours = score_method(ranked, relevant, types, ["ndcg@10", "recall@5", "mrr"], judged)
        names = {nDCG @ 10: "ndcg@10", R(rel=least) @ 5: "recall@5", RR(rel=least) @ 10: "mrr"}
        theirs = list(ir_measures.iter_calc(list(names), qrels, scored))
        compared = 0
        for metric in theirs:
            if names[metric.measure] != "ndcg@10" and relevant[metric.query_id] == ["none"]:
                continue  # no document that high: not a question at this relevant_grade
            expected = ours.per_question[metric.query_id][names[metric.measure]]
            assert metric.value == pytest.approx(expected, abs=1e-12), (least, metric, expected)
            compared += 1
        assert compared > 600
    # Graded gains change the figure: it is not binary nDCG under another name.
    graded = [ndcg_at_k(ranked[q], judged[q]) for q in judged]
    binary = [ndcg_at_k(ranked[q], [d for d, g in judged[q].items() if g > 0]) for q in judged]
    assert sum(abs(a - b) > 1e-6 for a, b in zip(graded, binary, strict=True)) > 100
    # The runs exercise what matters: perfect, zero and partial, more relevant than the cut-off.
    assert 1.0 in graded and 0.0 in graded and any(0 < x < 1 for x in graded)
    assert any(sum(g > 0 for g in grades.values()) > 10 for grades in judged.values())


def test_ndcg_worked_example_with_grades() -> None:
    # Ranked: a (3), x (never judged), b (0: judged not relevant), c (1); d (2) not retrieved.
    value = ndcg_at_k(["a", "x", "b", "c"], {"a": 3, "b": 0, "c": 1, "d": 2}, k=10)
    dcg = 3 + 1 / np.log2(5)
    ideal = 3 + 2 / np.log2(3) + 1 / np.log2(4)
    assert value == pytest.approx(dcg / ideal, abs=1e-15)
    assert ndcg_at_k(["a", "c"], ["a", "c"]) == 1.0  # ids alone: every one of grade 1


def _beir(tmp_path: Path) -> Path:
    root = tmp_path / "beir"
    shutil.copytree(BEIR, root)
    return root


def test_beir_scores_are_kept_as_grades_and_judged_zero_is_not_never_judged(tmp_path: Path) -> None:
    dataset = load_dataset(BEIR)
    b1, b2 = dataset.questions
    assert b2.relevant == ("d2",) and dict(b2.judgments) == {"d2": 2, "d3": 0} and b2.graded
    assert "d3" in b2.judgments and b2.judgments["d3"] == 0 and "d1" not in b2.judgments
    # A judgment of a document absent from the corpus, of grade 0, is dropped: no ranking holds it.
    assert dict(b1.judgments) == {"d1": 1} and not b1.graded
    with pytest.raises(TypeError):
        b2.judgments["d1"] = 1  # type: ignore[index]
    # A question built by hand, without grades: each relevant id is of grade 1.
    assert dict(Question("q", "t", "all", ("a", "b")).judgments) == {"a": 1, "b": 1}


def test_relevant_grade_counts_only_the_documents_that_high(tmp_path: Path) -> None:
    dataset = load_dataset(BEIR, relevant_grade=2)
    assert [q.id for q in dataset.questions] == ["b2"] and dataset.dropped_questions == 1
    with pytest.raises(DatasetError, match=r"no query with a relevant document \(score >= 3, the relevant_grade\)"):
        load_dataset(BEIR, relevant_grade=3)
    assert load_settings(tmp_path, {"relevant_grade": 2}, environ=NO_ENV).describe()["relevant_grade"] == 2
    assert "relevant_grade" not in Settings().describe() and "split" not in Settings().describe()


def test_split_chooses_the_qrels_file(tmp_path: Path) -> None:
    root = _beir(tmp_path)
    (root / "qrels" / "dev.tsv").write_text("query-id\tcorpus-id\tscore\nb3\td3\t1\n")
    dev = load_dataset(root, split="dev")
    assert [q.id for q in dev.questions] == ["b3"] and dev.fingerprint != load_dataset(root).fingerprint
    with pytest.raises(DatasetError) as caught:
        load_dataset(root, split="train")
    assert str(caught.value) == (
        f"{root}/qrels/train.tsv: missing. A BEIR folder needs qrels/train.tsv. "
        "The folder has qrels for: dev, test (choose one with split)."
    )
    assert Settings(split="dev").describe()["split"] == "dev"


@pytest.mark.parametrize(
    ("score", "problem"),
    [("2.5", 'score "2.5" is 2.5, not a whole number'), ("inf", 'score "inf" is not a finite number')],
)
def test_a_grade_that_is_not_a_whole_number_names_the_line(tmp_path: Path, score: str, problem: str) -> None:
    root = _beir(tmp_path)
    (root / "qrels" / "test.tsv").write_text(f"query-id\tcorpus-id\tscore\nb1\td1\t{score}\n")
    with pytest.raises(DatasetError, match=f"^{root}/qrels/test.tsv:2: {problem}"):
        load_dataset(root)
    (root / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nb1\td1\t2.0\n")
    assert dict(load_dataset(root).questions[0].judgments) == {"d1": 2}


def _native(tmp_path: Path, relevant: object) -> Path:
    root = tmp_path / "native"
    root.mkdir(exist_ok=True)
    docs = [{"id": i, "title": "", "text": f"texte {i}"} for i in ("a", "b", "c")]
    (root / "corpus.jsonl").write_text("".join(json.dumps(d) + "\n" for d in docs))
    question = {"id": "q1", "text": "question", "type": "t", "relevant": relevant}
    (root / "questions.jsonl").write_text(json.dumps(question) + "\n")
    return root


def test_native_relevant_as_a_mapping_of_grades(tmp_path: Path) -> None:
    (question,) = load_dataset(_native(tmp_path, {"a": 2, "b": 0, "c": 1})).questions
    assert question.relevant == ("a", "c") and dict(question.judgments) == {"a": 2, "b": 0, "c": 1}
    (question,) = load_dataset(_native(tmp_path, {"a": 2, "b": 0, "c": 1}), relevant_grade=2).questions
    assert question.relevant == ("a",)
    # The list form is grade 1 for each id, and so is a mapping of ones: the same fingerprint.
    listed = load_dataset(_native(tmp_path, ["a", "c"]))
    ones = load_dataset(_native(tmp_path, {"a": 1, "c": 1}))
    assert listed.fingerprint == ones.fingerprint
    assert load_dataset(_native(tmp_path, {"a": 2, "c": 1})).fingerprint != listed.fingerprint
    assert load_dataset(_native(tmp_path, {"a": 1, "b": 0, "c": 1})).fingerprint != listed.fingerprint


@pytest.mark.parametrize(
    ("relevant", "problem"),
    [
        ({"a": 1.5}, 'the grade of "a" in "relevant" is 1.5, not a whole number'),
        ({"a": True}, 'the grade of "a" in "relevant" is True, not a grade'),
        ({"a": 1, "zz": 0}, 'question "q1" judges document "zz", which is not in corpus.jsonl'),
        ({"a": 0}, 'question "q1" has no relevant document'),
        ("a", '"relevant" must be a list of document ids (strings) or an object of document id -> grade'),
    ],
)
def test_bad_native_grades_name_the_line(tmp_path: Path, relevant: object, problem: str) -> None:
    root = _native(tmp_path, relevant)
    with pytest.raises(DatasetError) as caught:
        load_dataset(root)
    assert str(caught.value).startswith(f"{root / 'questions.jsonl'}:1: {problem}")


def test_the_demo_s_fingerprint_and_digests_do_not_move() -> None:
    from demo_fixture import DEMO_BASELINE, DEMO_DATA

    dataset = load_dataset(DEMO_DATA)
    assert dataset.fingerprint == json.loads(DEMO_BASELINE.read_text())["profiles"]["local"]["fingerprint"]
    assert not any(q.graded for q in dataset.questions)
    # A question without grades is digested and kept as before grades were read.
    run = _run(dataset.questions)
    for q in dataset.questions:
        fields = json.dumps([q.text, q.type, sorted(q.relevant)], ensure_ascii=False).encode()
        assert question_digests(run)[q.id] == hashlib.sha256(fields).hexdigest()[:16]
        assert set(judgments(run)[q.id]) == {"relevant", "text", "type"}


def _run(questions: tuple[Question, ...] | list[Question]) -> Run:
    results = [
        QuestionResult(q, {"m": MethodResult(ids=["d2", "d3", "d1"], scores=[3.0, 2.0, 1.0], relevant_ranks={})})
        for q in questions
    ]
    return Run("beir", "sha256:x", {"analyzer": "fr-2"}, ["m"], results)


def test_the_baseline_keeps_the_grades_and_an_edited_grade_is_judged_again(tmp_path: Path) -> None:
    dataset = load_dataset(BEIR)
    run = _run(dataset.questions)
    kept = judgments(run)
    assert kept["b2"]["grades"] == {"d2": 2, "d3": 0} and "grades" not in kept["b1"]
    # A grade edited in the dataset: another digest, so the question is compared under the old ones.
    b2 = dataset.questions[1]
    edited = _run([dataset.questions[0], Question("b2", b2.text, b2.type, ("d2", "d3"), (("d2", 2), ("d3", 3)))])
    assert question_digests(edited)["b2"] != question_digests(run)["b2"]
    assert question_digests(edited)["b1"] == question_digests(run)["b1"]
    again = under_judgments(edited, {"judgments": kept}, ["b2"])
    assert again.results[1].question == b2
    # Scored on the old judgments: nDCG of the old grades.
    assert score_run(again, extra=True)["m"].per_question["b2"]["ndcg@10"] == pytest.approx(1.0)
    assert score_run(edited, extra=True)["m"].per_question["b2"]["ndcg@10"] < 1.0


def test_the_run_log_keeps_the_grades(tmp_path: Path) -> None:
    run = _run(load_dataset(BEIR).questions)
    save_run(run, tmp_path / "run.jsonl")
    lines = (tmp_path / "run.jsonl").read_text().splitlines()
    assert json.loads(lines[2])["grades"] == [["d2", 2], ["d3", 0]] and "grades" not in json.loads(lines[1])
    again = load_run(tmp_path / "run.jsonl")
    assert [dict(r.question.judgments) for r in again.results] == [dict(r.question.judgments) for r in run.results]
    assert [r.question.relevant for r in again.results] == [r.question.relevant for r in run.results]
    assert score_run(again, extra=True)["m"].per_question == score_run(run, extra=True)["m"].per_question


def test_the_cli_evaluates_the_chosen_split_and_grade(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from retrieval.cli import main

    root = _beir(tmp_path)
    monkeypatch.chdir(tmp_path)
    assert main(["--dataset", str(root), "--methods", "bm25", "--relevant-grade", "2", "--format", "json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["questions"] == 1 and report["dropped_questions"] == 1
    assert report["config"]["relevant_grade"] == 2
    assert main(["--dataset", str(root), "--methods", "bm25", "--relevant-grade", "2"]) == 0
    assert (
        "> 1 question(s) of the dataset have no document of grade 2 or more (relevant_grade)" in capsys.readouterr().out
    )
    (root / "qrels" / "dev.tsv").write_text("query-id\tcorpus-id\tscore\nb3\td3\t1\n")
    assert main(["--dataset", str(root), "--methods", "bm25", "--split", "dev", "--format", "json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["questions"] == 1 and report["config"]["split"] == "dev"
