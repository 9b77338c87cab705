"""Render the README's demo table from the committed baseline, and keep the README in sync.

    python scripts/readme_table.py           rewrite the block between the markers in README.md and docs/demo.md
    python scripts/readme_table.py --check   exit 1 if a block differs from the baseline

The table is the seed's: one row per method, recall@k, MRR, then recall@k per question
type in the order the types first appear in the dataset. Figures come from
baselines/metrics.json (profile `local`), so the README shows what the gate enforces.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from generated_block import BlockError, block_main

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
# Every page that shows the table: the README, and the demo's page of the documentation site.
PAGES = (README, ROOT / "docs" / "demo.md")
BASELINE = ROOT / "baselines" / "metrics.json"
PROFILE = "local"
START = "<!-- demo-table:start -->"
END = "<!-- demo-table:end -->"
# The report's method order; methods not listed here follow, sorted.
METHOD_ORDER = ("bm25", "vector", "hybrid", "rerank")
PROVIDERS = {"openai": "OpenAI-compatible API", "gemini": "Gemini API"}


class TableError(BlockError):
    """The table cannot be rendered or placed; the message says what to fix."""


def question_types(dataset: str | Path) -> list[str]:
    """Question types in order of first appearance in the dataset (the report's column order)."""
    from retrieval.data.dataset import load_dataset

    return load_dataset(dataset).question_types


def render_table(baseline: Mapping[str, Any], profile: str = PROFILE, types: Sequence[str] | None = None) -> str:
    """The seed-style Markdown table of one profile's baseline, 2 decimals, with a caption.

    `types` orders the per-type columns; types of the baseline it omits follow, sorted.
    """
    entry = baseline.get("profiles", {}).get(profile)
    if not entry:
        raise TableError(
            f"{BASELINE.relative_to(ROOT)} has no baseline for profile {profile!r}: "
            f"create it with `pytest --retrieval-profile {profile} --update-baseline`."
        )
    config = entry["config"]
    provider = str(config["embedding_provider"])
    k = int(config["k"])
    recall = f"recall@{k}"
    methods = entry["methods"]
    names = [m for m in METHOD_ORDER if m in methods] + sorted(set(methods) - set(METHOD_ORDER))
    present = {t for m in methods.values() for t in m.get("by_type", {})}
    ordered = [t for t in (types or ()) if t in present]
    ordered += sorted(present - set(ordered))

    header = ["Method", f"Recall@{k}", "MRR", *(f"Recall@{k} {t}" for t in ordered)]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for name in names:
        figures = methods[name]
        cells = [name, f"{figures[recall]:.2f}", f"{figures['mrr']:.2f}"]
        for t in ordered:
            value = figures.get("by_type", {}).get(t, {}).get(recall)
            cells.append("\N{EN DASH}" if value is None else f"{value:.2f}")
        lines.append("| " + " | ".join(cells) + " |")

    questions = len(next(iter(methods.values())).get("reciprocal_ranks", {})) if methods else 0
    caption = (
        f"Profile `{profile}`: embeddings `{config['embedding_model']}` "
        f"({config['dimensions']} dimensions, {PROVIDERS.get(provider, provider)}), "
        f"dataset `{entry['dataset']}` ({questions} questions), k = {k}."
    )
    # Each method's own settings, as the baseline records them (`hybrid.rrf_k`, `rerank.model`).
    own = [f"`{key}` = {json.dumps(value, ensure_ascii=False)}" for key, value in sorted(config.items()) if "." in key]
    if own:
        caption += " Method settings: " + ", ".join(own) + "."
    return "\n".join(lines) + "\n\n" + caption + "\n"


def render_block(root: Path = ROOT, profile: str = PROFILE) -> str:
    """The whole generated block, markers included, from the committed baseline and dataset."""
    from retrieval.config import load_settings

    path = root / "baselines" / "metrics.json"
    try:
        baseline = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise TableError(f"{path}: cannot read the baseline ({exc}).") from exc
    dataset = root / load_settings(root, {"profile": profile}).dataset
    table = render_table(baseline, profile, question_types(dataset))
    note = "<!-- Generated from baselines/metrics.json by `python scripts/readme_table.py`; do not edit by hand. -->"
    return f"{START}\n{note}\n\n{table}{END}"


def main(argv: Sequence[str] | None = None) -> int:
    return block_main(argv, __doc__, PAGES, START, END, render_block, "python scripts/readme_table.py")


if __name__ == "__main__":
    sys.exit(main())
