"""The gate as another repository meets it: a project with its own small dataset, its own
retriever (`module:factory`), its configuration in pyproject.toml, and no test file and no
conftest. Every run below is a real pytest session (in-process, for speed: the installed
`pytest11` entry point loads the plugin there exactly as in a subprocess).

The project's data, retriever and figures are FIXTURES of these tests, never a baseline.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections.abc import Callable
from importlib.metadata import entry_points
from pathlib import Path

import pytest
from fake_embeddings import FakeEmbeddingsServer

import retrieval.gate.against
from retrieval.gate.compare import Check
from retrieval.report.verdict import WorseQuestion

# FIXTURE corpus and questions (French: BM25 uses the French analyzer).
DOCUMENTS = [
    ("d1", "Restaurer une sauvegarde", "Ouvrez la console et lancez la restauration de la sauvegarde."),
    ("d2", "Réinitialiser le mot de passe", "Cliquez sur mot de passe oublié pour recevoir un lien."),
    ("d3", "Exporter les données", "Le bouton exporter produit un fichier CSV de toutes les données."),
    ("d4", "Inviter un utilisateur", "Un administrateur invite un utilisateur par courriel."),
    ("d5", "Supprimer un compte", "La suppression du compte efface les données après trente jours."),
    ("d6", "Changer la langue", "La langue de l'interface se choisit dans les préférences."),
]
QUESTIONS = [
    ("q1", "restaurer une sauvegarde", "exact", ["d1"]),
    ("q2", "mot de passe oublié", "exact", ["d2"]),
    ("q3", "lancer la restauration depuis la console", "paraphrase", ["d1"]),
    ("q4", "inviter un administrateur", "paraphrase", ["d4"]),
]

# FIXTURE retriever: the project's own in-process ranking logic (word overlap). SIGN = -1
# turns it into the "worse" retriever of a bad change.
RETRIEVER = """
import re

import numpy as np

from retrieval import top_k

SIGN = {sign}
WORDS = re.compile(r"\\w+")


class Overlap:
    name = "overlap"
    requires = ()
    needs_vectors = False

    def rank(self, context):
        documents = [set(WORDS.findall(d.content.lower())) for d in context.dataset.documents]
        rankings = []
        for question in context.dataset.questions:
            words = set(WORDS.findall(question.text.lower()))
            scores = np.array([SIGN * len(words & d) for d in documents], dtype=float)
            rankings.append(top_k(scores, context.depth))
        return rankings


def factory(settings):
    return Overlap()
"""

PYPROJECT = """[project]
name = "adopter"
version = "0"

[tool.retrieval]
dataset = "data/qa"
methods = {methods}
profile = "{profile}"
"""

# Each run is a fresh session; no cache between runs (unless a test asks for it), full failure
# lines (-vv: not cut to the width).
QUIET = ("-vv", "-W", "ignore::pytest.PytestAssertRewriteWarning")
NO_CACHE = ("-p", "no:cacheprovider")
# Plugins whose work no assertion here reads (reports, debugging aids, benchmarks, async tests,
# unittest classes and subtests, which these projects have none of), off in the runs that check one
# behaviour of the gate: their setup took a quarter of each run, and pdb's, unittest's and
# subtests' registration another 3% (the hooks pytest calls for each item and phase). pytest-xdist
# too (3%) unless the run asks for workers (`_run` with -n); and assertion rewriting (5%: the
# installed distributions' files listed, an import hook asked at each import), which in these
# runs could only rewrite a project's one-line test file: the package is imported already (hence
# QUIET's -W). The adopter flow keeps every plugin a repository would have.
WORKERS = ("xdist", "xdist.looponfail")
_UNREAD = (
    "junitxml",
    "pastebin",
    "doctest",
    "faulthandler",
    "legacypath",
    "stepwise",
    "setuponly",
    "setupplan",
    "unraisableexception",
    "threadexception",
    "assertion",
    "debugging",
    "unittest",
    "subtests",
    "benchmark",
    "anyio",
    "langsmith_plugin",
    "platformdirs",
)
UNREAD = tuple(arg for name in (*_UNREAD, *WORKERS) for arg in ("-p", f"no:{name}"))
UNREAD_WITH_WORKERS = tuple(arg for name in _UNREAD for arg in ("-p", f"no:{name}"))


def _write_dataset(
    folder: Path,
    questions: list[tuple[str, str, str, list[str]]] = QUESTIONS,
    documents: list[tuple[str, str, str]] = DOCUMENTS,
) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    rows = [{"id": i, "title": t, "text": x} for i, t, x in documents]
    (folder / "corpus.jsonl").write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))
    answers = [{"id": i, "text": t, "type": y, "relevant": r} for i, t, y, r in questions]
    (folder / "questions.jsonl").write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in answers))


def _retriever(project: Path, sign: str) -> None:
    (project / "myret.py").write_text(RETRIEVER.format(sign=sign))
    # Same second, same size would let Python reuse the stale bytecode of the old version.
    shutil.rmtree(project / "__pycache__", ignore_errors=True)


@pytest.fixture
def adopter(pytester: pytest.Pytester) -> Path:
    """FIXTURE project: data/qa, myret.py, [tool.retrieval] in pyproject.toml; no test, no conftest."""
    project = pytester.path
    _write_dataset(project / "data" / "qa")
    _retriever(project, "1.0")
    (project / "pyproject.toml").write_text(PYPROJECT.format(methods='["bm25", "myret:factory"]', profile="local"))
    return project


# The baseline files of the adopter project after `pytest --update-baseline`: made by the first
# test that asks, copied into the projects of the next ones (the files name no path).
_ACCEPTED: dict[str, bytes] = {}


@pytest.fixture
def accepted(pytester: pytest.Pytester, adopter: Path) -> Path:
    """FIXTURE: the adopter project after `pytest --update-baseline` (7 items passed)."""
    if not _ACCEPTED:
        _run(pytester, "--update-baseline").assert_outcomes(passed=7)
        _ACCEPTED.update({str(f.relative_to(adopter)): f.read_bytes() for f in (adopter / "baselines").rglob("*.json")})
    for name, data in _ACCEPTED.items():
        (adopter / name).parent.mkdir(parents=True, exist_ok=True)
        (adopter / name).write_bytes(data)
    return adopter


def _run(pytester: pytest.Pytester, *args: str, every_plugin: bool = False, cache: bool = False) -> pytest.RunResult:
    unread = () if every_plugin else UNREAD_WITH_WORKERS if "-n" in args else UNREAD
    return pytester.runpytest_inprocess(*(() if cache else NO_CACHE), *QUIET, *unread, *args)


HELD = (
    "retrieval gate (profile local, dataset qa): 2 methods, 10 figures held, 0 fell, 2 top-10 snapshots matched, "
    "0 moved"
)


def test_the_entry_point_registers_the_plugin() -> None:
    found = [ep for ep in entry_points(group="pytest11") if ep.value == "retrieval.gate.plugin"]
    assert [(ep.name, ep.value) for ep in found] == [("retrieval", "retrieval.gate.plugin")]


def test_loading_the_plugin_leaves_the_evaluator_unloaded() -> None:
    # pytest loads the plugin in every run of a repository that installs the package: the
    # evaluator and its libraries (~0.3 s) load only when the gate runs.
    heavy = (
        "numpy",
        "scipy",
        "vcr",
        "httpx",
        "google",
        "retrieval.evaluation.evaluate",
        "retrieval.gate.result",
        "retrieval.gate.against",
    )
    code = f"import sys, retrieval.gate.plugin; print(sorted(m for m in sys.modules if m.startswith({heavy!r})))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout == "[]\n"


def test_adopter_flow_record_update_gate_then_a_worse_retriever_fails(pytester: pytest.Pytester, adopter: Path) -> None:
    # 1. Recording: a profile that calls no model needs no cassette; with no baseline yet, red.
    recorded = _run(pytester, "--record", every_plugin=True)
    # The gate item says why; the items the stopped comparison left fail as not compared.
    recorded.assert_outcomes(passed=1, failed=6)
    recorded.stdout.fnmatch_lines(
        [
            "retrieval gate (profile local, dataset qa): nothing compared: baselines/metrics.json has no baseline*",
            "FAILED pyproject.toml::test_gate?gate? - baselines/metrics.json has no baseline for "
            "profile 'local': create it with `pytest --update-baseline`.",
        ]
    )
    # 2. Accept: the items known before it (the gate, its integrity items, bm25's snapshot).
    updated = _run(pytester, "--update-baseline", every_plugin=True)
    updated.assert_outcomes(passed=7)
    updated.stdout.fnmatch_lines(["*baseline updated*", "*overlap mrr: new 1.0000", "*overlap: new (4 questions)"])
    assert sorted(p.name for p in (adopter / "baselines").rglob("*.json")) == ["local.json", "metrics.json"]
    # 3. The gate: green, and the summary line says what was compared.
    # One item per baseline figure (2 methods x recall@5, mrr, 2 types), per snapshot, and the
    # gate and its integrity items (6).
    gated = _run(pytester, every_plugin=True)
    gated.assert_outcomes(passed=18)
    assert gated.ret == pytest.ExitCode.OK
    gated.stdout.fnmatch_lines([HELD])
    assert _run(pytester, "-m", "regression", every_plugin=True).parseoutcomes() == {"passed": 18}

    # 4. A worse retriever: red, naming the figures and the questions.
    _retriever(adopter, "-1.00")
    worse = _run(pytester, every_plugin=True, cache=True)
    worse.assert_outcomes(passed=13, failed=5)
    worse.stdout.fnmatch_lines(
        [
            "retrieval gate (profile local, dataset qa): 2 methods, 6 figures held, 4 fell, "
            "1 top-10 snapshots matched, 1 moved",
            "FAILED pyproject.toml::test_gate?overlap-recall@5-paraphrase? - *: q3 (1.0000 -> 0.0000; d1 at "
            "rank 6: *), q4 (1.0000 -> 0.0000; d4 at rank 6: *). If this change is intended*",
            "FAILED pyproject.toml::test_gate?overlap-mrr? - overlap mrr fell below the baseline: "
            "baseline 1.0000, current 0.1667, delta -0.8333 (tolerance 0.0). Questions that got worse: "
            "q1 (1.0000 -> 0.1667; d1 at rank 6: a ranking failure, within overlap top 20), "
            "q2 (1.0000 -> 0.1667; d2 at rank 6: a ranking failure, within overlap top 20), "
            "q3 (1.0000 -> 0.1667; d1 at rank 6: a ranking failure, within overlap top 20), "
            "q4 (1.0000 -> 0.1667; d4 at rank 6: a ranking failure, within overlap top 20).*",
            "FAILED pyproject.toml::test_gate?overlap-top-10? - overlap top 10 changed for 4 question(s): "
            "q1: d1 d2 d3 d4 d5 d6 -> d2 d3 d4 d5 d6 d1; *",
        ]
    )
    # --lf reruns exactly the failed items, "recall@5[paraphrase]" included (pytest 9 reads the
    # brackets of a cached id as parameters: the items' ids are parsed the same way).
    again = _run(pytester, "--lf", every_plugin=True, cache=True)
    again.assert_outcomes(failed=5)
    again.stdout.fnmatch_lines(["run-last-failure: rerun previous 5 failures*"])
    # 5. From a subfolder: the same items, the same outcomes.
    (adopter / "tests").mkdir()
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(adopter / "tests")
        _run(pytester, every_plugin=True).assert_outcomes(passed=13, failed=5)
        _retriever(adopter, "1.0")
        _run(pytester, every_plugin=True).assert_outcomes(passed=18)
        # 6. No baseline: red, the gate item saying how to make it (the others: not compared).
        (adopter / "baselines" / "metrics.json").unlink()
        _run(pytester, every_plugin=True).assert_outcomes(passed=1, failed=7)


def test_a_damaged_baseline_fails_the_gate_and_the_other_tests_still_run(
    pytester: pytest.Pytester, accepted: Path
) -> None:
    (accepted / "baselines" / "metrics.json").write_text('{"format": "retrieval-baseline-1",\n "profiles": {oops}\n')
    pytester.makepyfile(test_own="def test_own():\n    assert 1 + 1 == 2\n")
    result = _run(pytester)
    result.assert_outcomes(passed=1, failed=7)
    result.stdout.fnmatch_lines(
        ["*?gate? - BaselineError: baselines/metrics.json:2: invalid JSON (Expecting property name*"]
    )


def test_another_k_is_measured_and_fails_until_the_baseline_records_it(
    pytester: pytest.Pytester, accepted: Path
) -> None:
    # k (how many documents reach the LLM) changed: every figure compared with the baseline's,
    # recall@1 with its recall@5, and one item fails until the baseline records the change.
    (accepted / "pyproject.toml").write_text(
        PYPROJECT.format(methods='["bm25", "myret:factory"]', profile="local") + "k = 1\n"
    )
    changed = _run(pytester)
    changed.assert_outcomes(passed=17, failed=1)
    changed.stdout.fnmatch_lines(
        [
            "pyproject.toml::test_gate?overlap-recall@5-exact? * PASSED*",
            f"{HELD}; configuration changed since the baseline: k: 5 -> 1",
            "FAILED pyproject.toml::test_gate?configuration? - the configuration differs from the "
            "baseline's (k: 5 -> 1): the figures are compared with the baseline's. If the change is intended, run "
            "`pytest --update-baseline` (with --allow-regression if a figure fell, and say why in the PR) and commit "
            "baselines/metrics.json.",
        ]
    )
    updated = _run(pytester, "--update-baseline")
    updated.assert_outcomes(passed=18)
    updated.stdout.fnmatch_lines(["*k 5 -> 1: recall@1 compared with the baseline's recall@5", "*config k: 5 -> 1"])
    _run(pytester).assert_outcomes(passed=18)


def test_a_monorepo_root_run_gates_the_project_below_it_and_refuses_two(
    pytester: pytest.Pytester, accepted: Path
) -> None:
    # The adopter project moved to services/rag/; the repository's root has its own pytest
    # configuration and no [tool.retrieval]: `pytest` there used to leave the gate out, green.
    rag = accepted / "services" / "rag"
    rag.mkdir(parents=True)
    for name in ("data", "baselines", "myret.py", "pyproject.toml"):
        shutil.move(accepted / name, rag / name)
    (accepted / "pytest.ini").write_text("[pytest]\n")
    (accepted / "services" / "api").mkdir()
    (accepted / "services" / "api" / "test_api.py").write_text("def test_api():\n    assert True\n")
    gated = _run(pytester)
    gated.assert_outcomes(passed=19)
    gated.stdout.fnmatch_lines(["services/rag/pyproject.toml::test_gate?overlap-mrr? * PASSED*", HELD])
    # A second project below the root: the gate runs one per pytest run, so the run fails.
    shutil.copytree(rag, accepted / "services" / "search")
    refused = _run(pytester)
    assert refused.ret == pytest.ExitCode.TESTS_FAILED and refused.parseoutcomes() == {"passed": 1}
    refused.stdout.fnmatch_lines(
        [
            "retrieval gate FAILED: this run collects 2 retrieval projects (services/rag/pyproject.toml, "
            "services/search/pyproject.toml) and the gate runs one project per pytest run: gate each in its own, "
            "e.g. `pytest services/rag`, and leave the others out of this one (`--ignore`)."
        ]
    )
    _run(pytester, "--ignore", "services/search").assert_outcomes(passed=19)


def test_refused_update_writes_nothing_a_changed_dataset_is_gated_and_another_is_a_new_baseline(
    pytester: pytest.Pytester, accepted: Path
) -> None:
    files = {p: p.read_bytes() for p in (accepted / "baselines").rglob("*.json")}
    _retriever(accepted, "-1.00")
    refused = _run(pytester, "--update-baseline")
    # Refused: the gate item says so, the figures that fell fail as in a plain run.
    refused.assert_outcomes(passed=12, failed=6)
    refused.stdout.fnmatch_lines(
        ["*BaselineError: refusing to lower the baseline of profile 'local': overlap recall@5*"]
    )
    assert {p: p.read_bytes() for p in (accepted / "baselines").rglob("*.json")} == files
    _retriever(accepted, "1.0")
    # A question added over the same corpus: the figures are compared on the 4 questions both
    # datasets hold, and the change fails on its own until the baseline records it...
    questions = [*QUESTIONS, ("q5", "changer la langue", "exact", ["d6"])]
    _write_dataset(accepted / "data" / "qa", questions)
    added = _run(pytester)
    added.assert_outcomes(passed=17, failed=1)
    added.stdout.fnmatch_lines(
        [
            "retrieval gate (profile local, dataset qa): 2 methods, 10 figures held, 0 fell, 2 top-10 snapshots "
            "matched, 0 moved; dataset changed since the baseline: 1 added (q5), figures compared on the 4 questions "
            "both hold",
            "FAILED *?dataset? - the dataset changed since the baseline (1 added (q5)): the figures are compared "
            "on the 4 questions both hold. If the change is intended, run `pytest --update-baseline` (with "
            "--allow-regression if a figure fell, and say why in the PR) and commit baselines/metrics.json.",
        ]
    )
    # ...so a worse retriever in the same pull request is caught, and cannot be recorded.
    _retriever(accepted, "-1.00")
    _run(pytester).stdout.fnmatch_lines(["*?overlap-recall@5? - overlap recall@5 fell below the baseline*"])
    _run(pytester, "--update-baseline").stdout.fnmatch_lines(
        ["*BaselineError: refusing to lower the baseline of profile 'local': overlap recall@5*"]
    )
    _retriever(accepted, "1.0")
    renewed = _run(pytester, "--update-baseline")
    renewed.assert_outcomes(passed=18)
    renewed.stdout.fnmatch_lines(
        [
            "  dataset changed: 1 added (q5); compared on the 4 questions both hold:",
            "  no figure changed on them",
            "  every figure, old dataset (4 questions) -> new (5 questions):",
            "  bm25 recall@5: 1.0000 (unchanged)",
        ]
    )
    # Documents edited: the same questions, compared all the same (a document that now crowds
    # out an answer is a regression too); the change is named until the baseline records it.
    edited = [(i, t, x + " Voir aussi la documentation.") if i == "d6" else (i, t, x) for i, t, x in DOCUMENTS]
    _write_dataset(accepted / "data" / "qa", questions, edited)
    documents = _run(pytester)
    documents.assert_outcomes(passed=17, failed=1)
    documents.stdout.fnmatch_lines(
        [
            "FAILED *?dataset? - the dataset changed since the baseline (the documents "
            "changed (sha256:* -> sha256:*)): the figures are compared on the 5 questions*"
        ]
    )
    _run(pytester, "--update-baseline").assert_outcomes(passed=18)
    # Every question reworded: the same questions by id, compared under their old judgments.
    _write_dataset(accepted / "data" / "qa", [(i, f"{t} ?", y, r) for i, t, y, r in questions], edited)
    _run(pytester).stdout.fnmatch_lines(["*?dataset? - the dataset changed since the baseline (5 edited (q1, q2, *"])
    # Another dataset, not one question id the same: the old figures measured something else, so
    # nothing is "lowered" and the new baseline replaces the old one whole.
    _write_dataset(accepted / "data" / "qa", [(f"n{i}", t, y, r) for i, t, y, r in questions], edited)
    _run(pytester).stdout.fnmatch_lines(
        ["*?gate? - the dataset changed since the baseline was made (fingerprint *) and no question id is in both*"]
    )
    renewed = _run(pytester, "--update-baseline")
    renewed.assert_outcomes(passed=18)
    renewed.stdout.fnmatch_lines(["  new dataset: qa (fingerprint sha256:*) replaces qa (fingerprint sha256:*)"])


def test_a_baseline_from_before_question_digests_passes_and_says_how_to_add_them(
    pytester: pytest.Pytester, accepted: Path
) -> None:
    path = accepted / "baselines" / "metrics.json"
    data = json.loads(path.read_text())
    del data["profiles"]["local"]["questions"]
    path.write_text(json.dumps(data))
    older = _run(pytester)
    older.assert_outcomes(passed=18)
    older.stdout.fnmatch_lines(
        [f"{HELD}; the baseline has no question digests yet: `pytest --update-baseline` adds them (no figure changes)"]
    )
    _run(pytester, "--update-baseline").assert_outcomes(passed=18)
    _run(pytester).stdout.fnmatch_lines([HELD])
    assert "questions" in json.loads(path.read_text())["profiles"]["local"]


def test_each_profile_has_its_own_snapshots_and_the_profile_option_does_not_collide(
    pytester: pytest.Pytester, adopter: Path
) -> None:
    with (adopter / "pyproject.toml").open("a") as f:
        f.write(
            "\n[tool.retrieval.profiles.other]\nembedding_model = 'other-model'\n"
            "embedding_base_url = 'http://127.0.0.1:9/v1'\n"
        )
    # Another plugin's --profile (pytest-profiling has one) lives beside the gate's option.
    pytester.makeconftest("def pytest_addoption(parser):\n    parser.addoption('--profile', action='store_true')\n")
    _run(pytester, "--update-baseline").assert_outcomes(passed=7)
    local = (adopter / "baselines" / "rankings" / "local.json").read_bytes()
    other = _run(pytester, "--retrieval-profile", "other", "--update-baseline", "--profile")
    other.assert_outcomes(passed=7)
    assert (adopter / "baselines" / "rankings" / "local.json").read_bytes() == local
    assert sorted(json.loads((adopter / "baselines" / "metrics.json").read_text())["profiles"]) == ["local", "other"]
    # A tolerance set by hand in the baseline is not trusted (nor said); the project file's is.
    path = adopter / "baselines" / "metrics.json"
    data = json.loads(path.read_text())
    data["profiles"]["other"]["tolerance"] = 0.05
    path.write_text(json.dumps(data))
    summary = (
        "retrieval gate (profile other, dataset qa): 2 methods, 10 figures held, 0 fell, "
        "2 top-10 snapshots matched, 0 moved"
    )
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("RETRIEVAL_PROFILE", "other")
        _run(pytester).stdout.fnmatch_lines([summary])
        project = adopter / "pyproject.toml"
        project.write_text(project.read_text().replace('dataset = "data/qa"', 'dataset = "data/qa"\ntolerance = 0.02'))
        _run(pytester).stdout.fnmatch_lines([summary + ", tolerance 0.02"])


def test_a_figure_added_to_compare_is_gated_with_no_test_edit(
    pytester: pytest.Pytester, accepted: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    compare = retrieval.gate.against.compare

    def with_a_new_metric(*args: object, **kwargs: object) -> list[Check]:
        worse = (WorseQuestion("q3", "", "ndcg@10", 0.9, 0.5, (), "", ""),)
        return [*compare(*args, **kwargs), Check("overlap", "ndcg@10", 0.9, 0.5, 0.0, worse)]  # type: ignore[arg-type]

    monkeypatch.setattr(retrieval.gate.against, "compare", with_a_new_metric)
    result = _run(pytester)
    # A figure the baseline does not hold has no item of its own: the gate item carries it.
    result.assert_outcomes(passed=17, failed=1)
    result.stdout.fnmatch_lines(["FAILED *?gate? - overlap ndcg@10 fell below the baseline*q3*"])


def test_a_baseline_figure_the_run_no_longer_produces_fails(pytester: pytest.Pytester, accepted: Path) -> None:
    (accepted / "pyproject.toml").write_text(PYPROJECT.format(methods='["myret:factory"]', profile="local"))
    result = _run(pytester)
    result.assert_outcomes(passed=12, failed=6)
    result.stdout.fnmatch_lines(
        [
            "FAILED *?bm25-mrr? - the baseline gates bm25 mrr but this run did not produce it*",
            # The snapshot file as the project names it, whatever the working directory.
            "FAILED *?bm25-top-10? - baselines/rankings/local.json holds bm25's top 10 but this run did not produce "
            'bm25: `pytest --update-baseline --allow-regression "REASON"` drops it.',
        ]
    )
    (accepted / "baselines" / "rankings" / "local.json").unlink()
    unsnapped = _run(pytester)
    unsnapped.assert_outcomes(passed=11, failed=7)
    unsnapped.stdout.fnmatch_lines(
        [
            # Neither a snapshot of bm25 nor a ranking: no verdict, so the item fails (never passes unchecked).
            "FAILED *?bm25-top-10? - no verdict: this run compared nothing for bm25-top-10, so it cannot hold",
            "FAILED *?overlap-top-10? - baselines/rankings/local.json has no top 10 of overlap: write it with "
            "`pytest --update-baseline`.",
        ]
    )


def test_a_run_stopped_early_or_narrowed_says_how_many_gate_items_it_did_not_run(
    pytester: pytest.Pytester, accepted: Path
) -> None:
    _retriever(accepted, "-1.00")
    stopped = _run(pytester, "-x")
    stopped.assert_outcomes(passed=11, failed=1)
    stopped.stdout.fnmatch_lines(
        [
            "retrieval gate (profile local, dataset qa): 2 methods, 5 figures held, 1 fell, 0 top-10 snapshots "
            "matched, 0 moved; 6 of its 18 items not run (stopped early or deselected): not known to hold"
        ]
    )
    _run(pytester, cache=True).assert_outcomes(passed=13, failed=5)
    narrowed = _run(pytester, "--lf", cache=True)  # the failed items alone
    narrowed.assert_outcomes(failed=5)
    narrowed.stdout.fnmatch_lines(
        [
            "retrieval gate (profile local, dataset qa): 2 methods, 0 figures held, 4 fell, 0 top-10 snapshots "
            "matched, 1 moved; 13 of its 18 items not run (stopped early or deselected): not known to hold"
        ]
    )


def test_never_skips_never_runs_where_not_asked(pytester: pytest.Pytester, accepted: Path) -> None:
    pytester.makepyfile(test_own="def test_own():\n    pass\n")
    # Deselected, or only a test file named: the gate does not run, and one line says why (issue 25;
    # this test asserted silence before).
    for args, why in (
        (("-m", "not regression"), 'all 18 of its items deselected (-m "not regression")'),
        (("test_own.py",), "only tests named (test_own.py)"),
    ):
        result = _run(pytester, *args)
        assert result.ret == pytest.ExitCode.OK and result.parseoutcomes()["passed"] == 1
        result.stdout.fnmatch_lines(
            [f"retrieval gate not run: {why}; pyproject.toml configures it (`required = true` fails such a run)"]
        )
        assert "retrieval gate (" not in result.stdout.str()
        if args[0] == "-m":  # the gate's items count as deselected, so that pytest's counts add up
            result.stdout.fnmatch_lines(["collecting ... collected 19 items / 18 deselected / 1 selected"])
    # Listed, not run: the summary says nothing was compared.
    listed = _run(pytester, "--collect-only", "-q")
    assert listed.ret == pytest.ExitCode.OK
    listed.stdout.fnmatch_lines(
        ["retrieval gate (profile local): 18 items collected, nothing compared (--collect-only)"]
    )
    # ... but an update asked for and not done fails the session.
    asked = _run(pytester, "test_own.py", "--update-baseline")
    assert asked.ret == pytest.ExitCode.TESTS_FAILED
    asked.stdout.fnmatch_lines(["retrieval gate FAILED: --update-baseline was given but the gate was not selected*"])
    # A hook that skips the gate's items cannot make it pass.
    pytester.makeconftest("import pytest\n\ndef pytest_runtest_setup(item):\n    pytest.skip('flaky')\n")
    skipped = _run(pytester)
    assert skipped.ret == pytest.ExitCode.TESTS_FAILED
    skipped.stdout.fnmatch_lines(["retrieval gate FAILED: gate item(s) skipped: *The gate never skips*"])


def test_a_repository_without_project_file_is_left_alone(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_own="def test_own():\n    pass\n")
    result = _run(pytester)
    result.assert_outcomes(passed=1)
    assert "retrieval gate" not in result.stdout.str()
    refused = _run(pytester, "--record")
    assert refused.ret == pytest.ExitCode.USAGE_ERROR
    refused.stderr.fnmatch_lines(
        ["ERROR: --record: no project file: add a [[]tool.retrieval] table to pyproject.toml*"]
    )


def test_a_method_that_raises_fails_the_gate_naming_it_with_its_traceback(
    pytester: pytest.Pytester, adopter: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # FIXTURE retriever whose client error names a URL holding a key in its query and a token
    # in its path, as requests' errors do.
    monkeypatch.setenv("FIXTURE_SEARCH_TOKEN", "fixture-path-token-4567")
    (adopter / "myret.py").write_text(
        "import os\n\n\n"
        "class Failing:\n"
        "    name = 'failing'\n"
        "    requires = ()\n"
        "    needs_vectors = False\n\n"
        "    def rank(self, context):\n"
        "        url = 'https://search.example/' + os.environ['FIXTURE_SEARCH_TOKEN'] + '/q?api_key=fixture-secret-9'\n"
        "        raise RuntimeError('401 Unauthorized for url: ' + url)\n\n\n"
        "def factory(settings):\n"
        "    return Failing()\n"
    )
    result = _run(pytester)
    result.assert_outcomes(failed=7)
    result.stdout.fnmatch_lines(
        [
            "*?gate? - the evaluation raised RuntimeError: 401 Unauthorized for url: "
            "https://search.example/$FIXTURE_SEARCH_TOKEN/q?… (raised by method 'failing')",
        ]
    )
    result.stdout.fnmatch_lines([f'*File "{adopter / "myret.py"}", line 11, in rank'])
    assert "fixture-secret" not in result.stdout.str() and "fixture-path-token" not in result.stdout.str()


def test_cassettes_recorded_then_replayed_removed_or_edited(
    pytester: pytest.Pytester, adopter: Path, embeddings_server: FakeEmbeddingsServer
) -> None:
    """A profile that calls an embedding model (the fake server): its cassettes are recorded,
    the baseline records their digest, and the gate replays them with the server stopped."""
    (adopter / "pyproject.toml").write_text(
        PYPROJECT.format(methods='["bm25", "vector", "hybrid"]', profile="fake")
        + "\n[tool.retrieval.profiles.fake]\nembedding_provider = 'openai'\nembedding_model = 'fixture-e5'\n"
        f"embedding_base_url = '{embeddings_server.url}/v1'\ndimensions = 4\ninput_type = true\n"
    )
    # The items known before the first baseline: the gate, its integrity items, a snapshot per method.
    _run(pytester, "--record", "--update-baseline").assert_outcomes(passed=9)
    assert sorted(p.name for p in (adopter / "cassettes" / "fake").iterdir()) == [
        "corpus-vectors.json",
        "question-embeddings.json",
        "recording.json",
    ]
    # The corpus vectors: one segment beside the cassettes folder, no vector in cassettes/.
    assert len(list((adopter / "vectors" / "fake").glob("seg-*.vectors.npy"))) == 1
    embeddings_server.stop()
    _run(pytester).assert_outcomes(passed=24)

    # A question the cassettes never saw: a replay miss, never a call to the network.
    changed = [(i, t + " maintenant" if i == "q2" else t, y, r) for i, t, y, r in QUESTIONS]
    _write_dataset(adopter / "data" / "qa", changed)
    missed = _run(pytester)
    missed.assert_outcomes(failed=24)
    missed.stdout.fnmatch_lines(
        ["*?gate? - ReplayMissError: *question-embeddings.json was recorded: q2 «mot de passe*"]
    )
    _write_dataset(adopter / "data" / "qa")

    cassette = adopter / "cassettes" / "fake" / "question-embeddings.json"
    recorded = cassette.read_text()
    cassette.write_text(recorded.replace("\n", "\n ", 1))  # the same answers, other bytes
    edited = _run(pytester)
    # The figures are still compared (all held); the changed cassette fails on its own.
    edited.assert_outcomes(passed=23, failed=1)
    edited.stdout.fnmatch_lines(
        [
            "retrieval gate (profile fake, dataset qa): 3 methods, 15 figures held, 0 fell, 3 top-10 snapshots "
            "matched, 0 moved; cassettes changed since the baseline: question-embeddings.json",
            "*?cassettes? - the cassettes changed since the baseline (question-embeddings.json): run "
            "`pytest --update-baseline` and commit baselines/metrics.json with cassettes/fake/.",
        ]
    )
    cassette.unlink()
    removed = _run(pytester)
    removed.assert_outcomes(failed=24)
    removed.stdout.fnmatch_lines(
        [
            f"retrieval gate (profile fake): nothing compared: CassetteError: no cassette {cassette}: *",
            f"*?gate? - CassetteError: no cassette {cassette}: record it with "
            "`pytest --record --retrieval-profile fake`",
        ]
    )


def test_record_without_the_key_stops_before_any_call(
    pytester: pytest.Pytester, adopter: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("GEMINI_API_KEY", "GOOGLE_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    result = _run(pytester, "--record", "--retrieval-profile", "gemini")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        ["ERROR: --record with profile 'gemini' needs GEMINI_API_KEY (or GOOGLE_API_KEY); it is not set."]
    )
    assert not (adopter / "cassettes").exists()


@pytest.mark.slow  # real pytest-xdist workers
def test_under_xdist_workers_the_gate_runs_split_and_the_controller_sums_it_up(
    pytester: pytest.Pytester, accepted: Path
) -> None:
    # Real pytest-xdist workers (processes): each evaluates the gate at its collection and runs
    # the items it is sent; the controller, which collects nothing, prints the same summary line
    # and the same failures as one process does, from the reports.
    _retriever(accepted, "-1.0")
    split = _run(pytester, "-n", "2")
    split.assert_outcomes(passed=13, failed=5)
    split.stdout.fnmatch_lines(
        [
            "2 workers ?18 items?",
            "retrieval gate (profile local, dataset qa): 2 methods, 6 figures held, 4 fell, "
            "1 top-10 snapshots matched, 1 moved",
        ]
    )
    failed = sorted(line.split(" - ")[0] for line in split.outlines if line.startswith("FAILED "))
    assert failed == sorted(
        f"FAILED pyproject.toml::test_gate[overlap-{name}]"
        for name in ("mrr", "recall@5", "recall@5-exact", "recall@5-paraphrase", "top-10")
    )
    # Writing the cassettes or the baseline from each worker would write them twice: as xdist
    # does for --pdb, such a run is in one process, and says so.
    _retriever(accepted, "1.0")
    updated = _run(pytester, "-n", "2", "--update-baseline")
    updated.assert_outcomes(passed=18)
    updated.stdout.fnmatch_lines(
        ["retrieval gate: --update-baseline writes its files once, so this run is in one process (-n set aside)"]
    )
    updated.stdout.no_fnmatch_line("created: * workers")


def _edit_json(path: Path, edit: Callable[[dict], None]) -> None:
    data = json.loads(path.read_text())
    edit(data)
    path.write_text(json.dumps(data))


def _bm25_figures(data: dict) -> dict:
    return data["profiles"]["local"]["methods"]["bm25"]


RESTORE = "Restore it with `git checkout -- {path}` or rewrite it with `pytest --update-baseline`."


@pytest.mark.parametrize(
    ("file", "edit", "message"),
    [
        (
            "baselines/metrics.json",
            lambda data: _bm25_figures(data)["by_type"].update(paraphrase={}),
            "baselines/metrics.json: profile 'local': method 'bm25': by_type[paraphrase] is empty, "
            "expected its figures (e.g. recall@5). " + RESTORE.format(path="baselines/metrics.json"),
        ),
        (
            "baselines/metrics.json",
            lambda data: _bm25_figures(data)["by_type"].update(paraphrase={"mrr": 1.0}),
            "baselines/metrics.json: method 'bm25' by_type[paraphrase] has no recall@5: the baseline was made with "
            "another k or is damaged. " + RESTORE.format(path="baselines/metrics.json"),
        ),
        (
            "baselines/rankings/local.json",
            lambda data: data["methods"].update(bm25=["x"]),
            "baselines/rankings/local.json: method 'bm25' must map each question id to a list of document ids "
            "(strings). Restore it with `git checkout baselines/rankings/local.json`, or rewrite it with "
            "`pytest --update-baseline`.",
        ),
    ],
    ids=["by_type empty", "by_type without recall@5", "snapshot method a list"],
)
def test_a_baseline_or_snapshot_of_the_wrong_shape_is_one_failed_gate_item(
    pytester: pytest.Pytester, accepted: Path, file: str, edit: Callable[[dict], None], message: str
) -> None:
    _edit_json(accepted / file, edit)
    pytester.makepyfile(test_own="def test_own():\n    assert 1 + 1 == 2\n")
    result = _run(pytester)
    # The gate item says what is wrong; the other items fail as not compared.
    assert result.parseoutcomes()["passed"] == 1 and result.ret == pytest.ExitCode.TESTS_FAILED
    expected = message.format(root=accepted)
    # The report line exactly (brackets in the message rule out fnmatch).
    assert f"FAILED pyproject.toml::test_gate[gate] - BaselineError: {expected}" in (result.stdout.lines)


@pytest.mark.parametrize(
    ("line", "problem"),
    [
        ("prices = 3", 'prices must be a table of models ([prices."MODEL"]), got 3.'),
        ("profiles = 3", "profiles must be tables ([profiles.NAME]), got 3."),
        (
            'hybrid_inputs = ["bm25", "bm25"]',
            "hybrid_inputs lists bm25 more than once, got ['bm25', 'bm25']: list each method once.",
        ),
    ],
    ids=["prices a number", "profiles a number", "hybrid input twice"],
)
def test_a_wrong_value_type_in_the_project_file_is_one_failed_gate_item(
    pytester: pytest.Pytester, adopter: Path, line: str, problem: str
) -> None:
    with (adopter / "pyproject.toml").open("a") as file:
        file.write(line + "\n")  # still inside [tool.retrieval]
    pytester.makepyfile(test_own="def test_own():\n    assert 1 + 1 == 2\n")
    result = _run(pytester)
    result.assert_outcomes(passed=1, failed=1)
    # PYPROJECT has 8 lines: the appended one is line 9.
    where = f"{adopter}/pyproject.toml, line 9"
    expected = f"FAILED pyproject.toml::test_gate[gate] - ConfigError: {where}: {problem}"
    assert expected in result.stdout.lines


def test_a_wrong_flag_is_named_as_pytest_spells_it(pytester: pytest.Pytester, accepted: Path) -> None:
    # The settings loader serves the CLI too: its message used to say `--executor`, a flag pytest has not.
    ran = _run(pytester, "--retrieval-executor", "spark")
    ran.stdout.fnmatch_lines(["*--retrieval-executor must be one of local, ray, got 'spark'.*"])
    assert "--executor must" not in ran.stdout.str().replace("--retrieval-executor must", "")
