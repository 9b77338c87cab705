"""FIXTURE project for the baseline's trust tests: four questions, one in-process retriever whose
rankings come from `ranks.json` in the working directory, so a test makes it worse on exactly
the questions it names. No model, no cassette."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from retrieval.config import Settings, load_settings
from retrieval.gate.accept import accept
from retrieval.gate.result import GateResult, run_gate

DOCUMENTS = [
    ("d1", "Restaurer une sauvegarde", "Ouvrez la console et lancez la restauration."),
    ("d2", "Réinitialiser le mot de passe", "Cliquez sur mot de passe oublié."),
    ("d3", "Exporter les données", "Le bouton exporter produit un fichier CSV."),
    ("d4", "Inviter un utilisateur", "Un administrateur invite un utilisateur."),
    ("d5", "Supprimer un compte", "La suppression efface les données."),
]
QUESTIONS = [
    ("q1", "restaurer une sauvegarde", "exact", ["d1"]),
    ("q2", "mot de passe oublié", "exact", ["d2"]),
    ("q3", "lancer la restauration", "paraphrase", ["d1"]),
    ("q4", "inviter un administrateur", "paraphrase", ["d4"]),
]
# The retriever's rankings: each question's relevant document first.
GOOD = {"q1": ["d1", "d2"], "q2": ["d2", "d1"], "q3": ["d1", "d3"], "q4": ["d4", "d1"]}

RETRIEVER = """
import json
from pathlib import Path

import numpy as np

from retrieval import top_k


class Table:
    name = "table"
    requires = ()
    needs_vectors = False

    def rank(self, context):
        ranks = json.loads(Path("ranks.json").read_text())
        ids = [d.id for d in context.dataset.documents]
        rankings = []
        for question in context.dataset.questions:
            order = ranks[question.id]
            scores = np.array([len(order) - order.index(i) if i in order else 0 for i in ids], dtype=float)
            rankings.append(top_k(scores, context.depth))
        return rankings


def factory(settings):
    return Table()
"""


def write_questions(root: Path, questions: list[tuple[str, str, str, list[str]]]) -> None:
    rows = [{"id": i, "text": t, "type": y, "relevant": r} for i, t, y, r in questions]
    text = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows)
    (root / "data" / "qa" / "questions.jsonl").write_text(text)


def write_ranks(root: Path, ranks: dict[str, list[str]]) -> None:
    (root / "ranks.json").write_text(json.dumps(ranks))


def make_project(root: Path, extra: str = "") -> Path:
    """The project at `root` (the working directory of the test), its baseline accepted."""
    folder = root / "data" / "qa"
    folder.mkdir(parents=True, exist_ok=True)
    rows = [{"id": i, "title": t, "text": x} for i, t, x in DOCUMENTS]
    (folder / "corpus.jsonl").write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))
    write_questions(root, QUESTIONS)
    write_ranks(root, GOOD)
    (root / "trust_table.py").write_text(RETRIEVER)
    # k = 2 of 5 documents: a document pushed to rank 3 is lost to recall@2.
    (root / "retrieval.toml").write_text(f'dataset = "data/qa"\nmethods = ["trust_table:factory"]\nk = 2\n{extra}')
    accept(gate(root))
    return root


def settings(root: Path) -> Settings:
    return load_settings(root, {"profile": "local"})


def gate(root: Path, ref: str | None = None) -> GateResult:
    return run_gate(settings(root), baseline_ref=ref)


def failing(result: GateResult) -> list[str]:
    return [c.name for c in result.checks if not c.ok]


def worse(root: Path) -> None:
    """The retriever made worse on q2 (its relevant document falls from rank 1 to 2)."""
    write_ranks(root, {**GOOD, "q2": ["d5", "d1"]})


def git(root: Path, *args: str) -> str:
    """git in `root`, with an identity of its own (the machine may have none)."""
    done = subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@example.invalid", "-c", "commit.gpgsign=false", *args],
        cwd=root,
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout


def commit_on_main(root: Path) -> None:
    """The project as the base branch `main` holds it: a git repository with one commit."""
    (root / ".gitignore").write_text(".cache/\n__pycache__/\n")
    git(root, "init", "-q", "-b", "main")
    git(root, "add", "-A")
    git(root, "commit", "-qm", "base")
