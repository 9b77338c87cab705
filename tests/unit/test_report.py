"""The report: the seed's table, failures, Mermaid chart, cost, baseline arrows, and JSON."""

from __future__ import annotations

import json
import re
from dataclasses import replace
from typing import Any

import pytest

from retrieval.data.dataset import Document, Question
from retrieval.gate.schema import entry_for
from retrieval.measures.metrics import score_run
from retrieval.report.build import Report, build_report, render_json
from retrieval.report.sections import render_markdown
from retrieval.run.cost import Usage
from retrieval.run.results import MethodResult, QuestionResult, Run
from retrieval.text.markdown import fit, folded

# Hand-built run (a fixture): 4 questions, 3 methods. Expected figures, worked by hand:
#   bm25   recall@5 (1+0+1+1)/4 = 0.75   MRR (1+0+1/3+1)/4 = 0.58
#          per type: identifiant 1.00, paraphrase 0.50, mixte 1.00
#   vector recall@5 1.00                 MRR (1/3+1+1+1/4)/4 = 0.65
#   hybrid recall@5 1.00                 MRR (1+1/2+1/4+1)/4 = 0.69  -> the best method
# hybrid fails q2 (relevant 2nd, inside its top 3: ranking) and q3 (relevant 4th: recall).
DOCUMENTS = {
    "HEL-4040": "HEL-4040 : fichier d'import invalide",
    "proc-restauration": "Restaurer une sauvegarde\nChoisissez un point de sauvegarde.",
    "faq-masquage": "Masquer les numéros de sécurité sociale\nActivez le masquage.",
    "proc-diagnostic": "Lancer un diagnostic\nVérifie la connexion.",
    "proc-purger-cache": "Purger le cache\nLibère l'espace disque.",
    "inc-2026-04": "Incident d'avril 2026\nDoublons d'enregistrements.",
    "x1": "Tarifs\nGrille tarifaire.",
    "x2": "Jetons\nRotation des jetons.",
}
# The corpus as the report reads it: title on the first line, then the text.
CORPUS = [
    Document(doc_id, content.partition("\n")[0], content.partition("\n")[2]) for doc_id, content in DOCUMENTS.items()
]
QUESTIONS = [
    Question("q1", "J'obtiens HEL-4040", "identifiant", ("HEL-4040",)),
    Question("q2", "Revenir à l'état d'hier", "paraphrase", ("proc-restauration",)),
    Question("q3", "Cacher la sécu", "paraphrase", ("faq-masquage",)),
    Question("q4", "diagnostic puis purge du cache", "mixte", ("proc-diagnostic", "proc-purger-cache")),
]
RANKED = {
    "bm25": [
        ["HEL-4040", "x1", "x2"],
        ["x1", "x2", "inc-2026-04"],
        ["x1", "x2", "faq-masquage"],
        ["proc-diagnostic", "proc-purger-cache", "x1"],
    ],
    "vector": [
        ["x1", "x2", "HEL-4040"],
        ["proc-restauration", "x1", "x2"],
        ["faq-masquage", "x1", "x2"],
        ["x1", "x2", "inc-2026-04", "proc-diagnostic", "proc-purger-cache"],
    ],
    "hybrid": [
        ["HEL-4040", "x1", "x2"],
        ["inc-2026-04", "proc-restauration", "x1"],
        ["x1", "x2", "inc-2026-04", "faq-masquage"],
        ["proc-diagnostic", "proc-purger-cache", "x1"],
    ],
}


def _run(mode: str = "live") -> Run:
    results = []
    for i, q in enumerate(QUESTIONS):
        methods = {}
        for name, per_question in RANKED.items():
            ids = per_question[i]
            methods[name] = MethodResult(
                ids=ids,
                scores=[1.0 - j / 10 for j in range(len(ids))],
                relevant_ranks={d: ids.index(d) + 1 if d in ids else None for d in q.relevant},
                retrieved=len(ids),  # these short lists are the whole rankings
            )
        results.append(QuestionResult(q, methods))
    usage = {
        "corpus embeddings": Usage(calls=2, input_tokens=1000, seconds=1.5),
        "bm25": Usage(seconds=0.01),
        "vector": Usage(calls=1, input_tokens=200, seconds=0.2),
        "hybrid": Usage(seconds=0.001),
    }
    return Run(
        dataset="fixture",
        fingerprint="sha256:fixture",
        config={
            "profile": "local",
            "embedding_model": "emb-model",
            "k": 5,
            "candidates": 3,
            "depth": 1000,
        },
        pipelines={"bm25": ["bm25"], "vector": ["vector"], "hybrid": ["bm25", "vector", "hybrid"]},
        methods=["bm25", "vector", "hybrid"],
        results=results,
        usage=usage,
        mode=mode,
        declarations=DECLARATIONS,
        cost_models={"corpus embeddings": "emb-model", "vector": "emb-model"},
    )


DASH = "-"
# What the built-in methods declare (retrieval.methods.base.Declaration.as_dict), as a fixture.
DECLARATIONS: dict[str, dict[str, Any]] = {
    "bm25": {},
    "vector": {"needs_vectors": True},
    "hybrid": {"requires": ["bm25", "vector"]},
}
PRICES = {"emb-model": {"input": 1.0}}  # per million tokens


def _report(run: Run | None = None) -> Report:
    return build_report(run or _run(), CORPUS, PRICES)


def _table(markdown: str) -> list[str]:
    lines = markdown.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("| Method | Recall@5 | MRR"))
    end = next(i for i in range(start, len(lines)) if not lines[i].startswith("|"))
    return lines[start:end]


def test_table_has_the_seeds_header_and_one_row_per_method() -> None:
    table = _table(render_markdown(_report()))
    assert table[0] == ("| Method | Recall@5 | MRR | Recall@5 identifiant | Recall@5 paraphrase | Recall@5 mixte |")
    assert set(table[1]) <= set("|-")
    assert table[2:] == [
        "| bm25 | 0.75 | 0.58 | 1.00 | 0.50 | 1.00 |",
        "| vector | 1.00 | 0.65 | 1.00 | 1.00 | 1.00 |",
        "| hybrid | 1.00 | 0.69 | 1.00 | 1.00 | 1.00 |",
    ]


def test_report_names_dataset_questions_and_best_method() -> None:
    report = _report()
    assert report.best == "hybrid"
    assert report.questions == 4
    assert report.types == ["identifiant", "paraphrase", "mixte"]
    markdown = render_markdown(report)
    assert "fixture (4 questions" in markdown
    assert "Failures at rank 1 of the best method (hybrid)" in markdown


def test_failures_section_classifies_each_failure() -> None:
    markdown = render_markdown(_report())
    failures = markdown.split("### Failures at rank 1")[1].split("```mermaid")[0]
    q2 = failures.split("**q2**")[1].split("**q3**")[0]
    q3 = failures.split("**q3**")[1].split("\n\n")[0]
    assert "ranking failure" in q2 and "recall failure" not in q2
    assert "expected ['proc-restauration'], obtained ['inc-2026-04', 'proc-restauration', 'x1']" in q2
    assert "recall failure" in q3 and "ranking failure" not in q3
    assert "absent from hybrid top 3" in q3
    assert "no analysed term in common" in q3  # "Cacher la sécu" shares nothing with the masking page
    assert "**q1**" not in failures and "**q4**" not in failures
    assert "1 recall failure(s), 1 ranking failure(s)." in failures


def test_failure_ranks_in_bm25_and_vector() -> None:
    markdown = render_markdown(_report())
    q2 = markdown.split("**q2**")[1].split("**q3**")[0]
    # proc-restauration: 2nd here, not retrieved by BM25, 1st for vector.
    assert "`proc-restauration`: rank 2 here, bm25 rank none: not retrieved" in q2
    assert "vector rank 1" in q2


def test_no_failures_says_so() -> None:
    run = _run()
    for result in run.results:
        relevant = result.question.relevant
        for name in RANKED:
            result.methods[name] = MethodResult(list(relevant), [1.0] * len(relevant), {d: 1 for d in relevant})
    markdown = render_markdown(_report(run))
    assert "None: every question has a relevant document first." in markdown
    assert "recall failure" not in markdown and "ranking failure" not in markdown


def test_mermaid_chart_has_the_mrr_bars() -> None:
    markdown = render_markdown(_report())
    block = re.search(r"```mermaid\n(.*?)```", markdown, re.S)
    assert block is not None
    chart = block.group(1).splitlines()
    assert chart[0] == "xychart-beta"
    assert '  x-axis ["bm25", "vector", "hybrid"]' in chart
    assert '  y-axis "MRR" 0 --> 1' in chart
    assert "  bar [0.58, 0.65, 0.69]" in chart
    assert any("title" in line and "4 questions" in line for line in chart)


def test_cost_section() -> None:
    markdown = render_markdown(_report())
    cost = markdown.split("### Cost")[1]
    assert "| Method | Pipeline | Calls | Input tokens |" in cost
    rows = {line.split(" | ")[0].strip("| "): line for line in cost.splitlines() if line.startswith("| ")}
    # vector: 1 call, 200 tokens at 1 per million: $0.0002, i.e. $0.05 per 1,000 questions (4 here).
    assert rows["vector"] == f"| vector | vector | 1 | 200 | 0 | 0.20 | {DASH} | $0.0002 | $0.05 |"
    assert rows["hybrid"].startswith("| hybrid | bm25 → vector → hybrid | 1 | 200 | 0 |")
    assert rows["bm25"].startswith("| bm25 | bm25 | 0 | 0 | 0 |")
    assert "Indexing (corpus embeddings, once): 2 call(s), 1000 tokens, 1.50 s." in cost


def test_unpriced_model_shows_n_a() -> None:
    report = build_report(_run(), CORPUS, prices={})
    vector = next(c for c in report.cost if c.method == "vector")
    assert vector.cost is None
    assert f"| vector | vector | 1 | 200 | 0 | 0.20 | {DASH} | n/a | n/a |" in render_markdown(report)


def test_baseline_cells_show_arrows() -> None:
    baseline = {
        "bm25": {
            "recall@5": 0.75,
            "mrr": 0.50,
            "by_type": {
                "identifiant": {"recall@5": 1.0},
                "paraphrase": {"recall@5": 0.75},
                "mixte": {"recall@5": 1.0},
            },
        }
    }
    table = _table(render_markdown(_report(), baseline))
    bm25 = next(line for line in table if line.startswith("| bm25 "))
    # The delta as the gate says it, to 4 decimals: a small drop is never "-0.00".
    assert bm25 == "| bm25 | 0.75 = | 0.58 ▲ +0.0833 | 1.00 = | 0.50 ▼ -0.2500 | 1.00 = |"
    # Methods the baseline does not know are shown without comparison.
    assert "| vector | 1.00 | 0.65 | 1.00 | 1.00 | 1.00 |" in table


def test_baseline_of_the_same_run_is_all_equal() -> None:
    run = _run()
    entry = entry_for(run, score_run(run), k=5)
    table = _table(render_markdown(_report(run), entry["methods"]))
    for row in table[2:]:
        cells = [c.strip() for c in row.strip("|").split("|")][1:]
        assert all(c.endswith(" =") for c in cells), row


def test_json_has_the_same_figures() -> None:
    report = _report()
    data = json.loads(render_json(report))
    assert data["best"] == "hybrid"
    assert data["types"] == ["identifiant", "paraphrase", "mixte"]
    assert list(data["scores"]) == ["bm25", "vector", "hybrid"]
    for method, scores in report.scores.items():
        # JSON round-trips floats exactly: the very same figures, not rounded ones.
        assert data["scores"][method]["overall"] == scores.overall
        assert data["scores"][method]["by_type"] == scores.by_type
        assert data["scores"][method]["per_question"] == scores.per_question
    assert data["scores"]["hybrid"]["overall"]["mrr"] == pytest.approx((1 + 1 / 2 + 1 / 4 + 1) / 4)
    assert data["scores"]["bm25"]["by_type"]["paraphrase"]["recall@5"] == pytest.approx(0.5)
    assert [(f["question_id"], f["kind"]) for f in data["failures"]] == [
        ("q2", "ranking"),
        ("q3", "recall"),
    ]
    assert data["failures"][1]["relevant"][0]["shared_terms"] == []
    cost = {c["method"]: c for c in data["cost"]}
    assert cost["vector"]["calls"] == 1 and cost["vector"]["cost"] == pytest.approx(0.0002)
    assert data["indexing"] == {
        "corpus embeddings": {
            "calls": 2,
            "input_tokens": 1000,
            "output_tokens": 0,
            "seconds": 1.5,
            "recorded_seconds": None,
        }
    }
    # Between methods: hybrid against bm25 and vector (it reads them), recall@5 then mrr.
    assert [(c["reference"], c["candidate"], c["metric"]) for c in data["comparisons"]] == [
        ("bm25", "hybrid", "recall@5"),
        ("bm25", "hybrid", "mrr"),
        ("vector", "hybrid", "recall@5"),
        ("vector", "hybrid", "mrr"),
    ]
    assert data["ties"] == {}  # this hand-built run records no tie information


def test_replay_mode_explains_recorded_time() -> None:
    markdown = render_markdown(_report(_run(mode="replay")))
    assert "Replayed calls take no time" in markdown
    assert ", replay; retrieval-regression " in markdown.splitlines()[0]


def test_against_the_baseline_every_moved_figure_has_its_interval() -> None:
    run = _run()
    entry = entry_for(run, score_run(run), k=5)
    # The baseline had hybrid's q2 first (it is 2nd now): hybrid mrr fell from 1.0 to 0.5 there.
    entry["methods"]["hybrid"]["reciprocal_ranks"]["q2"] = 1.0
    entry["methods"]["hybrid"]["mrr"] = 0.8125
    # The project's tolerance, given by the caller (a baseline file's own is not trusted).
    report = build_report(run, CORPUS, PRICES, baseline=entry, tolerance=0.01)
    lines = render_markdown(report).splitlines()
    start = lines.index("**Against the baseline (tolerance 0.01):**")
    assert lines[start + 2 :][:1] == [
        "- hybrid mrr 0.81 -> 0.69 (-0.12, 95 % CI -0.38..+0.00; 0 better, 1 worse, 3 same)"
    ]
    assert lines[start + 3] == ""  # only the figure that moved
    against = [c for c in report.comparisons if c.reference == "baseline"]
    assert [(c.candidate, c.metric, c.difference) for c in against if c.difference] == [("hybrid", "mrr", -0.125)]


def test_without_a_baseline_change_nothing_moved_is_said() -> None:
    run = _run()
    report = build_report(run, CORPUS, PRICES, baseline=entry_for(run, score_run(run), k=5))
    assert "**Against the baseline:** no figure moved." in render_markdown(report)


def test_types_are_escaped_and_dropped_questions_said() -> None:
    run = _run()
    for result in run.results:  # this run's questions only: QUESTIONS, shared by every test, stays
        question = result.question
        object.__setattr__(
            result, "question", replace(question, type="a|b <i>" if question.type == "mixte" else question.type)
        )
    markdown = render_markdown(build_report(run, CORPUS, PRICES, dropped_questions=2))
    header = next(line for line in markdown.splitlines() if line.startswith("| Method |"))
    assert header.endswith("| Recall@5 a\\|b &lt;i&gt; |")
    assert "> 2 question(s) of the dataset have no relevant document (every qrels score is 0)" in markdown


def test_a_long_failure_list_shows_twenty_and_folds_the_rest_in_a_details_block() -> None:
    assert folded([["- a", "  a1"], ["- b"], ["- c"]], "failure(s)", shown=2) == [
        *("- a", "  a1", "- b", ""),
        *("<details><summary>1 more failure(s)</summary>", "", "- c", "", "</details>"),
    ]
    assert folded([["- a"], ["- b"]], "failure(s)", shown=2) == ["- a", "- b"]
    # 12 copies of the fixture's questions: hybrid, the best, fails q2 and q3 of each (24 failures).
    run = _run()
    run.results = [
        QuestionResult(replace(r.question, id=f"{r.question.id}-{c:02}"), r.methods)
        for c in range(12)
        for r in run.results
    ]
    markdown = render_markdown(_report(run))
    failures = markdown.split("### Failures at rank 1 of the best method (hybrid)")[1].split("###")[0]
    shown, folded_part = failures.split("<details><summary>4 more failure(s)</summary>")
    assert re.findall(r"\*\*(q\d-\d\d)\*\*", shown) == [f"q{n}-{c:02}" for c in range(10) for n in (2, 3)]
    assert re.findall(r"\*\*(q\d-\d\d)\*\*", folded_part) == ["q2-10", "q3-10", "q2-11", "q3-11"]
    assert folded_part.rstrip().endswith("</details>\n\n12 recall failure(s), 12 ranking failure(s).")
    remedies = markdown.split("### Which remedy could reach each failure of hybrid")[1]
    assert remedies.count("<details><summary>4 more failure(s)</summary>") == 1
    # A question about HTML, in the folded part of both lists, ends neither fold early.
    at = next(i for i, r in enumerate(run.results) if r.question.id == "q3-11")
    q3 = run.results[at]
    run.results[at] = QuestionResult(replace(q3.question, text="Où mettre </details> et <!-- ?"), q3.methods)
    markdown = render_markdown(_report(run)).split("### Judged@")[0]  # the failure and remedy lists
    assert markdown.count("</details>") == 2
    assert markdown.count("Où mettre &lt;/details> et &lt;!-- ?") == 2


def test_a_report_over_the_job_summary_limit_drops_its_folded_lists_then_cuts_at_a_line() -> None:
    items = [[f"- **q{i:02}** a failure and its analysis"] for i in range(60)]
    markdown = "\n".join(["## R", "", *folded(items, "failure(s)"), "", "### Cost", ""])
    assert fit(markdown, limit=len(markdown.encode())) == markdown
    shown = [f"- **q{i:02}** a failure and its analysis" for i in range(20)]
    dropped = "\n".join(
        [
            *("## R", "", *shown, ""),
            "_40 more failure(s): left out of this summary, over its size limit; the full report has them._",
            *("", "### Cost", ""),
        ]
    )
    assert fit(markdown, limit=len(markdown.encode()) - 1) == dropped
    cut = fit(markdown, limit=len(dropped.encode()) - 1)
    assert cut == "\n".join(["## R", "", *shown]) + (
        "\n\n_The summary stops here, at its size limit: the full report has the rest._\n"
    )
    # The limit is in bytes and the cut is at a line's end: a multi-byte character is never split.
    accents = "é" * 50 + "\n" + "é" * 50 + "\n"
    stop = "\n\n_The summary stops here, at its size limit: the full report has the rest._\n"
    assert fit(accents, limit=124 + len(stop)) == "é" * 50 + stop  # 124 bytes: the first line and 11.5 "é"
