"""CPU seconds of load_dataset and corpus_fingerprint on a dataset folder, against another
version of retrieval/data/dataset.py in the same process (rounds alternate).

    python benchmarks/scale.py --documents 100000 --project kb100k
    git show b3f98c7:retrieval/data/dataset.py > /tmp/dataset_before.py
    python benchmarks/load_dataset.py kb100k/data --reference /tmp/dataset_before.py --rounds 3

Prints, per round and version, the CPU seconds (time.process_time: not inflated by waiting for
a core on a loaded machine) of load_dataset and then of corpus_fingerprint of its documents,
and the fingerprints, which must be equal between the versions.
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
import time
from pathlib import Path
from types import ModuleType

# Runs from a checkout without installation.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import retrieval.data.dataset as current


def _module(path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location("dataset_reference", path)
    if spec is None or spec.loader is None:
        raise SystemExit(f"error: {path}: not a Python module")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("dataset", type=Path, help="a dataset folder (corpus.jsonl, questions.jsonl)")
    parser.add_argument("--reference", type=Path, help="another retrieval/data/dataset.py to time alongside")
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    if not 1 <= args.rounds <= 20:
        parser.error("--rounds must be 1..20")
    versions = [("this version", current)]
    if args.reference is not None:
        versions.insert(0, ("reference", _module(args.reference)))
    fingerprints = set()
    for round_number in range(1, args.rounds + 1):
        for name, module in versions:
            start = time.process_time()
            dataset = module.load_dataset(args.dataset)
            loaded = time.process_time() - start
            start = time.process_time()
            corpus = module.corpus_fingerprint(dataset.documents)
            hashed = time.process_time() - start
            fingerprints.add((dataset.fingerprint, corpus))
            print(
                f"round {round_number}, {name}: load_dataset {loaded:.2f} s CPU, corpus_fingerprint {hashed:.2f} s CPU,"
                f" total {loaded + hashed:.2f} s ({len(dataset.documents):,} documents;"
                f" {dataset.fingerprint}, {corpus})",
                flush=True,
            )
            del dataset
    if len(fingerprints) != 1:
        print("error: the versions' fingerprints differ", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
