"""The unit tests read the demo from their own fixture (demo_fixture.py), never the repository's
dataset, cassettes, baseline or [tool.retrieval]: those belong to the gate, and re-recording them,
changing rrf_k or pointing the gate at another dataset must move the gate only (issue 9)."""

from __future__ import annotations

import re
from pathlib import Path

UNIT = Path(__file__).resolve().parent
# A path built from the repository's root into what the gate owns, or its settings.
READS_THE_GATES_FILES = re.compile(
    r"""(ROOT|parents\[2\])\s*/\s*["'](data|cassettes|baselines)\b|load_settings\(\s*ROOT\b"""
)


def test_no_unit_test_reads_the_gates_files() -> None:
    found = [
        f"{path.name}:{number}: {line.strip()}"
        for path in sorted(UNIT.glob("*.py"))
        if path.name != Path(__file__).name
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if READS_THE_GATES_FILES.search(line)
    ]
    assert found == [], "use demo_fixture (DEMO_DATA, DEMO_CASSETTES, DEMO_BASELINE, demo_settings) instead"
