"""How long the secret scan of one cassette takes (the gate scans every committed cassette on
every run): the demo's corpus cassette, and the same repeated to a large corpus's size.

    python scripts/secret_scan_speed.py             # 44 MiB, the best of 5
    python scripts/secret_scan_speed.py --mib 10 --repeat 3

Prints one line per size: the best time of `--repeat` scans, in milliseconds.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from retrieval.text.redaction import find_secrets

CASSETTE = Path(__file__).resolve().parents[1] / "cassettes" / "local" / "corpus-embeddings.json"


def best_of(text: str, repeat: int) -> float:
    """The shortest of `repeat` scans of `text`, in seconds."""
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        find_secrets(text, {})
        times.append(time.perf_counter() - started)
    return min(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mib", type=float, default=44.0, help="size of the large cassette (default 44)")
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    small = CASSETTE.read_text(encoding="utf-8")
    data = json.loads(small)
    copies = int(args.mib * 2**20 // len(small)) + 1
    large = json.dumps({**data, "interactions": data["interactions"] * copies}, indent=2)
    for name, text in (("demo corpus cassette", small), ("repeated", large)):
        print(f"{name} ({len(text) / 2**20:.1f} MiB): {best_of(text, args.repeat) * 1000:.1f} ms")


if __name__ == "__main__":
    main()
