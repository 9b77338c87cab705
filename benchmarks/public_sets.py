"""Rebuild two public retrieval sets as BEIR folders under a folder of yours (never in this
repository), from public copies, and check them against their published sizes.

    python benchmarks/public_sets.py scifact scifact.zip /tmp/sets/scifact
    python benchmarks/public_sets.py squad-it SQuAD_it-test.json.gz /tmp/sets/squad-it
    python benchmarks/public_sets.py cranfield FOLDER /tmp/sets/cranfield   # cran.all.1400, cran.qry, cranqrel

- `scifact`: BEIR's SciFact from AllenAI's release as exported to CSV (a zip of corpus_train.csv,
  claims_train.csv, claims_validation.csv; `abstract` holds each abstract's sentences as a list
  literal). BEIR's corpus is the title and the sentences joined by a space, each stripped; its
  queries are every claim (train, then validation), its test qrels each validation claim's cited
  documents, grade 1. Checked: 5,183 documents, 1,109 queries, 339 test judgments of 300
  queries, and the exact size in characters of BEIR's corpus.jsonl (7,998,337), queries.jsonl
  (128,945) and qrels/test.tsv (5,049), measured on a public copy of BEIR's files.
- `squad-it`: SQuAD-it's test set (Croce et al., 2018; Italian, CC BY-SA 4.0): each paragraph a
  document (its article's title, its text), each question a query judged relevant to its own
  paragraph, grade 1, as MTEB builds its SQuAD-style retrieval sets (GermanQuAD-Retrieval).
  Checked: 48 articles, 2,010 paragraphs, 7,609 questions.
- `cranfield`: the Cranfield collection (1,400 aeronautics abstracts, 225 queries) with its graded
  judgments, Cleverdon's scale: 1 "a complete answer" to 4 "of minimum interest", -1 "of no
  interest". Written as BEIR scores: grade = 5 - code (4 for a complete answer down to 1), and 0
  (judged not relevant) for -1. The judgments number the queries 1 to 225 in file order, not by
  their `.I` numbers (which skip). Checked: 1,400 documents, 225 queries, 1,837 judgments; the two
  empty records (471, 995) are left out with their judgments.
"""

from __future__ import annotations

import argparse
import ast
import csv
import gzip
import io
import json
import sys
import tokenize
import zipfile
from pathlib import Path

SCIFACT = {"documents": 5183, "queries": 1109, "judgments": 339, "judged": 300}
SCIFACT_CHARS = {"corpus.jsonl": 7_998_337, "queries.jsonl": 128_945, "qrels/test.tsv": 5_049}
SQUAD_IT = {"articles": 48, "documents": 2010, "queries": 7609}
CRANFIELD = {"documents": 1400, "queries": 225, "judgments": 1837}


def _sentences(literal: str) -> list[str]:
    """The strings of a list literal written without commas (numpy's repr: ['a.' 'b.'])."""
    tokens = tokenize.generate_tokens(io.StringIO(literal).readline)
    return [ast.literal_eval(t.string) for t in tokens if t.type == tokenize.STRING]


def _jsonl(records: list[dict[str, str]]) -> str:
    return "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records)


def _write(out: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        (out / name).parent.mkdir(parents=True, exist_ok=True)
        (out / name).write_text(text, encoding="utf-8")


def scifact(source: Path, out: Path) -> list[str]:
    csv.field_size_limit(sys.maxsize)
    with zipfile.ZipFile(source) as archive:

        def rows(name: str) -> list[dict[str, str]]:
            return list(csv.DictReader(io.TextIOWrapper(archive.open(name), "utf-8", newline="")))

        corpus = [
            {
                "_id": d["doc_id"],
                "title": d["title"].strip(),
                "text": " ".join(s.strip() for s in _sentences(d["abstract"])),
            }
            for d in rows("corpus_train.csv")
        ]
        claims: dict[str, tuple[str, str, str]] = {}
        for split in ("train", "validation"):
            for row in rows(f"claims_{split}.csv"):
                claims.setdefault(row["id"], (row["claim"], split, row["cited_doc_ids"]))
    queries = [{"_id": qid, "text": claim} for qid, (claim, _, _) in claims.items()]
    judged = sorted(
        {
            (qid, doc.strip(","))
            for qid, (_, split, cited) in claims.items()
            if split == "validation"
            for doc in cited.strip("[]").split()
        }
    )
    files = {
        "corpus.jsonl": _jsonl(corpus),
        "queries.jsonl": _jsonl(queries),
        "qrels/test.tsv": "query-id\tcorpus-id\tscore\n" + "".join(f"{q}\t{d}\t1\n" for q, d in judged),
    }
    counts = {
        "documents": len(corpus),
        "queries": len(queries),
        "judgments": len(judged),
        "judged": len({q for q, _ in judged}),
    }
    problems = [f"{k}: {counts[k]:,}, BEIR has {v:,}" for k, v in SCIFACT.items() if counts[k] != v]
    problems += [
        f"{n}: {len(files[n]):,} characters, BEIR's has {v:,}" for n, v in SCIFACT_CHARS.items() if len(files[n]) != v
    ]
    if not problems:
        _write(out, files)
    return problems


def squad_it(source: Path, out: Path) -> list[str]:
    data = json.loads(gzip.decompress(source.read_bytes()))["data"]
    corpus, queries, judged = [], [], []
    for a, article in enumerate(data):
        for p, paragraph in enumerate(article["paragraphs"]):
            doc = f"a{a:02d}p{p:03d}"
            corpus.append({"_id": doc, "title": article["title"], "text": paragraph["context"]})
            for qa in paragraph["qas"]:
                queries.append({"_id": qa["id"], "text": qa["question"]})
                judged.append((qa["id"], doc))
    counts = {"articles": len(data), "documents": len(corpus), "queries": len(queries)}
    problems = [f"{k}: {counts[k]:,}, SQuAD-it's test set has {v:,}" for k, v in SQUAD_IT.items() if counts[k] != v]
    if len({q["_id"] for q in queries}) != len(queries):
        problems.append("question ids are not unique")
    if not problems:
        _write(
            out,
            {
                "corpus.jsonl": _jsonl(corpus),
                "queries.jsonl": _jsonl(queries),
                "qrels/test.tsv": "query-id\tcorpus-id\tscore\n" + "".join(f"{q}\t{d}\t1\n" for q, d in judged),
            },
        )
    return problems


def _cranfield_records(text: str) -> list[dict[str, str]]:
    """The records of a SMART-format file (.I number, then .T/.A/.B/.W fields)."""
    records: list[dict[str, str]] = []
    field = ""
    for line in text.splitlines():
        if line.startswith(".I "):
            records.append({"I": line[3:].strip()})
            field = ""
        elif line[:1] == "." and line[1:2].isalpha() and len(line.strip()) == 2:
            field = line[1]
            records[-1][field] = ""
        elif field:
            records[-1][field] = f"{records[-1][field]} {line.strip()}".strip()
    return records


def cranfield(source: Path, out: Path) -> list[str]:
    documents = _cranfield_records((source / "cran.all.1400").read_text("utf-8"))
    queries = _cranfield_records((source / "cran.qry").read_text("utf-8"))
    # Two records (471 and 995) have neither title nor text: left out, with their judgments.
    corpus = [
        {"_id": d["I"], "title": d.get("T", ""), "text": d.get("W", "") or d.get("T", "")}
        for d in documents
        if d.get("W") or d.get("T")
    ]
    kept = {d["_id"] for d in corpus}
    lines = []
    judgments = 0
    for row in (source / "cranqrel").read_text("utf-8").split("\n"):
        if row.strip():
            query, doc, code = row.split()
            judgments += 1
            if doc in kept:
                lines.append(f"{query}\t{doc}\t{0 if int(code) == -1 else 5 - int(code)}\n")
    counts = {"documents": len(documents), "queries": len(queries), "judgments": judgments}
    problems = [f"{k}: {counts[k]:,}, Cranfield has {v:,}" for k, v in CRANFIELD.items() if counts[k] != v]
    if not problems:
        _write(
            out,
            {
                "corpus.jsonl": _jsonl(corpus),
                # The judgments' query numbers are positions in cran.qry.
                "queries.jsonl": _jsonl([{"_id": str(n), "text": q["W"]} for n, q in enumerate(queries, 1)]),
                "qrels/test.tsv": "query-id\tcorpus-id\tscore\n" + "".join(lines),
            },
        )
    return problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("set", choices=["scifact", "squad-it", "cranfield"])
    parser.add_argument(
        "source",
        type=Path,
        help="the public copy (scifact: the CSV zip; squad-it: SQuAD_it-test.json.gz; cranfield: its folder)",
    )
    parser.add_argument("out", type=Path, help="the BEIR folder to write (outside this repository)")
    args = parser.parse_args(argv)
    if Path(__file__).resolve().parents[1] in [args.out.resolve(), *args.out.resolve().parents]:
        parser.error("write the data outside this repository: it is not committed")
    problems = {"scifact": scifact, "squad-it": squad_it, "cranfield": cranfield}[args.set](args.source, args.out)
    for problem in problems:
        print(f"error: {args.source}: {problem}; nothing written", file=sys.stderr)
    if not problems:
        print(f"{args.out}: written and checked", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    raise SystemExit(main())
