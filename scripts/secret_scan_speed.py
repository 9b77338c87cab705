"""How long the secret scan takes on a large cassette set (the gate scans every committed cassette
on every run): the demo's recorded question embeddings (texts and base64 vectors) and its corpus
sent as embedding requests, as a corpus cassette holds them, repeated to a large corpus's size.

    python scripts/secret_scan_speed.py                       # 44 MiB, the best of 5
    python scripts/secret_scan_speed.py --mib 10 --repeat 3
    python scripts/secret_scan_speed.py --vs /tmp/redaction.py  # another version, pair by pair

Prints one line per size: the best time of `--repeat` scans, in milliseconds. With `--vs FILE` (a
redaction.py, e.g. `git show main:retrieval/text/redaction.py > /tmp/redaction.py`), this
version's scan and FILE's run in turn, and the median of the pairs' ratios is printed too: a
ratio taken pair by pair stays meaningful on a loaded machine, a time does not.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from retrieval.text.redaction import find_secrets  # noqa: E402

QUESTIONS = ROOT / "cassettes" / "local" / "question-embeddings.json"
CORPUS = ROOT / "data" / "demo" / "corpus.jsonl"
Scan = Callable[[str, Any], list[str]]


def cassette_text() -> str:
    """The demo's question-embeddings cassette, with one interaction more per 16 corpus documents:
    the documents as the request's input, answered with the recorded vectors."""
    data = json.loads(QUESTIONS.read_text(encoding="utf-8"))
    recorded = data["interactions"][0]
    documents = [json.loads(line) for line in CORPUS.read_text(encoding="utf-8").splitlines() if line.strip()]
    body = json.loads(recorded["request"]["body"])
    for start in range(0, len(documents), 16):
        texts = [f"{d['title']}\n{d['text']}" for d in documents[start : start + 16]]
        request = {**recorded["request"], "body": json.dumps({**body, "input": texts}, ensure_ascii=False)}
        data["interactions"].append({**recorded, "request": request})
    return json.dumps(data, indent=2)


def best_of(scan: Scan, text: str, repeat: int) -> float:
    """The shortest of `repeat` scans of `text`, in seconds."""
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        scan(text, {})
        times.append(time.perf_counter() - started)
    return min(times)


def paired_ratio(scan: Scan, other: Scan, text: str, repeat: int) -> float:
    """The median of `repeat` ratios (this scan's time / the other's), the two run in turn."""
    ratios = []
    for _ in range(repeat):
        ratios.append(best_of(scan, text, 1) / best_of(other, text, 1))
    return statistics.median(ratios)


def _load(path: str) -> Scan:
    spec = importlib.util.spec_from_file_location("other_redaction", path)
    assert spec is not None and spec.loader is not None, path
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.find_secrets


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--mib", type=float, default=44.0, help="size of the large cassette (default 44)")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--vs", metavar="FILE", help="another redaction.py to compare with, pair by pair")
    args = parser.parse_args()
    small = cassette_text()
    data = json.loads(small)
    copies = int(args.mib * 2**20 // len(small)) + 1
    large = json.dumps({**data, "interactions": data["interactions"] * copies}, indent=2)
    other = _load(args.vs) if args.vs else None
    for name, text in (("demo cassette", small), ("repeated", large)):
        line = f"{name} ({len(text) / 2**20:.1f} MiB): {best_of(find_secrets, text, args.repeat) * 1000:.1f} ms"
        if other is not None:
            line += (
                f"; {args.vs}: {best_of(other, text, args.repeat) * 1000:.1f} ms; "
                f"ratio this/{Path(args.vs).name}, median of {args.repeat} pairs: "
                f"{paired_ratio(find_secrets, other, text, args.repeat):.2f}"
            )
        print(line)


if __name__ == "__main__":
    main()
