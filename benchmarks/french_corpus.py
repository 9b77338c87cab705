"""A real French corpus of up to ~100,000 documents with 1,000 human questions, built under /tmp.

    git clone https://github.com/etalab-ia/piaf-code /tmp/piaf-code        # piaf-v1.0.json
    git clone https://github.com/COST-ELTeC/ELTeC-fra /tmp/ELTeC-fra       # plain1/*.txt
    python benchmarks/french_corpus.py --piaf /tmp/piaf-code/piaf-v1.0.json \
        --eltec /tmp/ELTeC-fra/plain1 --documents 100000 --questions 1000 --out /tmp/kb-fr100k

What it holds (why): the questions are people's, from PIAF (Etalab's French SQuAD-like set,
3,835 questions written by volunteers on 761 paragraphs of French Wikipedia, v1.0); a question's
relevant document is the Wikipedia paragraph it was written on, its type the article's category.
No public French Wikipedia dump of 100,000 paragraphs is reachable from this machine, so the rest
of the corpus is other real French text: the 100 novels of ELTeC-fra (the COST action's European
Literary Text Collection, 1840-1920, 8.4 million words), their paragraphs joined in reading
order into documents of CHUNK_WORDS to 2 x CHUNK_WORDS words (PIAF's paragraphs average 111).
The distractors are literature, not encyclopaedia: an engine that ranks by topic finds the
Wikipedia paragraphs more easily than among other Wikipedia paragraphs, so quality figures on
this set are for comparing engines on the same set, not for any other use. Timing is what it
measures best: real French words, accents, elisions, punctuation and document lengths.

Both sources are the projects' own files (PIAF: MIT; ELTeC: CC BY 4.0); the set is written where
it is used (`--out`, under /tmp) and never committed. Writes DIR/corpus.jsonl and
DIR/questions.jsonl (the native format of `python -m retrieval --dataset DIR`).
"""

from __future__ import annotations

import argparse
import json
import random
from collections.abc import Iterator
from pathlib import Path

CHUNK_WORDS = 64


def piaf(path: Path) -> tuple[list[dict[str, str]], list[dict[str, object]]]:
    """PIAF's paragraphs as documents and its questions, each relevant to its paragraph."""
    documents: list[dict[str, str]] = []
    questions: list[dict[str, object]] = []
    for a, article in enumerate(json.loads(path.read_text(encoding="utf-8"))["data"]):
        title = article["title"].replace("<i>", "").replace("</i>", "")
        for p, paragraph in enumerate(article["paragraphs"]):
            doc_id = f"piaf-{a:03d}-{p:02d}"
            documents.append({"id": doc_id, "title": title, "text": paragraph["context"].strip()})
            for qa in paragraph["qas"]:
                text = qa["question"].strip()
                if text:
                    questions.append({"text": text, "type": article.get("categorie") or "piaf", "relevant": [doc_id]})
    return documents, questions


def eltec(folder: Path) -> Iterator[dict[str, str]]:
    """The novels' paragraphs joined into documents of CHUNK_WORDS to 2 x CHUNK_WORDS words,
    novel by novel in file-name order, each novel's chunks in reading order."""
    for path in sorted(folder.glob("*.txt")):
        novel = path.stem  # FRA00101_Adam
        words: list[str] = []
        count = 0
        for line in path.read_text(encoding="utf-8").splitlines():
            line = line.strip()
            if not line:
                continue
            words.extend(line.split())
            while len(words) >= CHUNK_WORDS:
                cut = len(words) if len(words) < 2 * CHUNK_WORDS else CHUNK_WORDS
                count += 1
                yield {"id": f"eltec-{novel}-{count:05d}", "title": novel, "text": " ".join(words[:cut])}
                words = words[cut:]
        if words:
            count += 1
            yield {"id": f"eltec-{novel}-{count:05d}", "title": novel, "text": " ".join(words)}


def build(piaf_path: Path, eltec_folder: Path, n_documents: int, n_questions: int, seed: int, out: Path) -> None:
    documents, questions = piaf(piaf_path)
    distractors = list(eltec(eltec_folder))
    wanted = n_documents - len(documents)
    if wanted > len(distractors):
        raise SystemExit(
            f"{n_documents:,} documents asked, {len(documents) + len(distractors):,} available"
            f" ({len(documents)} PIAF paragraphs + {len(distractors):,} ELTeC chunks): lower --documents"
        )
    random.Random(seed).shuffle(distractors)
    documents.extend(distractors[: max(wanted, 0)])
    chosen = random.Random(seed).sample(questions, min(n_questions, len(questions)))
    out.mkdir(parents=True, exist_ok=True)
    with open(out / "corpus.jsonl", "w", encoding="utf-8") as handle:
        for document in documents:
            handle.write(json.dumps(document, ensure_ascii=False) + "\n")
    with open(out / "questions.jsonl", "w", encoding="utf-8") as handle:
        for number, question in enumerate(chosen, 1):
            handle.write(json.dumps({"id": f"q{number:04d}", **question}, ensure_ascii=False) + "\n")
    words = sum(len(d["text"].split()) for d in documents)
    average = words / len(documents)
    print(f"{out}: {len(documents):,} documents ({average:.0f} words on average), {len(chosen):,} questions")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--piaf", type=Path, required=True, help="piaf-v1.0.json of etalab-ia/piaf-code")
    parser.add_argument("--eltec", type=Path, required=True, help="the plain1/ folder of COST-ELTeC/ELTeC-fra")
    parser.add_argument("--documents", type=int, default=100_000)
    parser.add_argument("--questions", type=int, default=1_000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    build(args.piaf, args.eltec, args.documents, args.questions, args.seed, args.out)


if __name__ == "__main__":
    main()
