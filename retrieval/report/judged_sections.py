"""The report's sections on judgments: Judged@k (what the figures rest on) and the LLM judge's
agreement with people. Like retrieval.report.sections, Markdown from the report's data."""

from __future__ import annotations

from retrieval.report.build import ROUND, Report
from retrieval.text.markdown import escape_cell, escape_text, folded

__all__ = ["agreement_section", "judged_section"]

JUDGE_COMMAND = "python -m retrieval judge"


def _fmt(value: float) -> str:
    return f"{value:.{ROUND}f}"


def judged_section(report: Report) -> list[str]:
    """Judged@k per method, per question type and per question (the unjudged documents of each
    top k), and the command that pools them for judging."""
    judged = report.judged
    if not judged:
        return []
    k = next(iter(judged.values())).k
    out = [
        "",
        f"### Judged@{k}: what the figures rest on",
        "",
        f"Every figure counts a document nobody judged as not relevant. Judged@{k} is the share of each "
        f"top {k} that has a judgment (any grade, 0 included), as ir_measures' Judged@{k}.",
        "",
        "| Method | "
        + " | ".join([f"Judged@{k}", *(f"Judged@{k} {escape_cell(t)}" for t in report.types)])
        + f" | Unjudged in the top {k} |",
        "|---|" + "---|" * (len(report.types) + 2),
    ]
    for method, s in judged.items():
        cells = [_fmt(s.overall), *(_fmt(s.by_type[t]) if t in s.by_type else "-" for t in report.types)]
        out.append(f"| {method} | " + " | ".join(cells) + f" | {s.holes} |")
    pool = {(q, d) for s in judged.values() for q, ids in s.unjudged.items() for d in ids}
    out.append("")
    if not pool:
        out.append(f"Every document of every top {k} is judged.")
    else:
        out.append(
            f"{len(pool)} (question, document) pair(s) of the methods' top {k} are unjudged: `{JUDGE_COMMAND}` "
            "pools them for judging (a page, or `--export` to a spreadsheet), "
            f"`{JUDGE_COMMAND} --llm` has the profile's LLM propose grades."
        )
        out += ["", f"Unjudged documents of each top {k}, per question:", ""]
        items = []
        for q, qtype in report.question_types.items():
            parts = [
                f"{m} {_fmt(s.per_question[q])}: " + ", ".join(f"`{escape_text(d)}`" for d in s.unjudged[q])
                for m, s in judged.items()
                if q in s.unjudged
            ]
            if parts:
                items.append([f"- **{escape_text(q)}** ({escape_text(qtype)}): " + "; ".join(parts)])
        out += folded(items, "question(s)")
    if report.unused_judgments:
        out += [
            "",
            f"{report.unused_judgments} line(s) of judgments.jsonl judge a question not evaluated or a document "
            "not in the corpus: kept in the file, not used.",
        ]
    if report.llm_judgments and not report.accept_llm:
        out += [
            "",
            f"{report.llm_judgments} judgment(s) of judgments.jsonl are an LLM's proposals (`llm:`): not counted, "
            "as the project does not set `accept_llm_judgments = true`.",
        ]
    return out


def agreement_section(report: Report) -> list[str]:
    """Each LLM judge's agreement with people on the pairs both judged: Cohen's kappa on the
    grades and on relevant-or-not, and the confusion table."""
    out: list[str] = []
    for a in report.agreement or []:
        kappa = "undefined (one grade on both sides)" if a.kappa is None else f"{a.kappa:.2f}"
        binary = "undefined" if a.binary_kappa is None else f"{a.binary_kappa:.2f}"
        counted = "count" if report.accept_llm else "do not count (accept_llm_judgments is false)"
        out += [
            "",
            f"### LLM judge `llm:{escape_text(a.model)}` against people",
            "",
            f"On the {a.pairs} pair(s) both judged (people: `human:`, `import:` and the dataset's own "
            f"judgments): Cohen's kappa {kappa} on the grades, {binary} on relevant or not (from grade "
            f"{a.relevant_grade}); the same grade for {a.exact:.0%} of them. Its grades {counted}.",
            "",
        ]
        grades = list(a.confusion)
        out.append("| People's grade ↓, the LLM's → | " + " | ".join(str(g) for g in grades) + " |")
        out.append("|---|" + "---|" * len(grades))
        out += [f"| {g} | " + " | ".join(str(a.confusion[g][h]) for h in grades) + " |" for g in grades]
    return out
