"""One judging session: the pooled pairs left to judge, who judges (`human:<name>`), and every
judgment written at once to the dataset's judgments.jsonl (retrieval.data.judgment_file).

What the page's requests do, without HTTP: the state (the pairs, and the judgments the file holds
for them now: another tab's, another person's), one pair's details, a grade, an undo. A grade is
written before it is answered, so a judgment the page shows as saved is on disk whatever happens
to the server next; an undo puts back what the grade replaced, only if nobody changed the pair
since (another tab): otherwise it is refused, and nothing is lost either way.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from retrieval.data.dataset import Dataset, Question
from retrieval.data.judgment_file import (
    Judgment,
    Key,
    known_judgments,
    source_problem,
    timestamp,
    update_judgments,
    valid_date,
)
from retrieval.data.judgment_merge import winner
from retrieval.judging.page_data import pair_details
from retrieval.judging.pool import Candidate

__all__ = ["GRADES", "JudgingError", "JudgingSession"]

# The page's scale (TREC's, UMBRELA's): 0 not relevant, 1 related, 2 partly answers, 3 answers.
GRADES = (0, 1, 2, 3)


class JudgingError(ValueError):
    """A request the session refuses: `status` is the HTTP status the page gets, with the message."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


def _as_dict(judgment: Judgment | None) -> dict[str, Any] | None:
    if judgment is None:
        return None
    return {"grade": judgment.grade, "source": judgment.source, "date": judgment.date}


@dataclass
class JudgingSession:
    """The pairs a judge is asked about and where the judgments go."""

    dataset: Dataset
    pool: list[Candidate]
    source: str
    path: Path
    lock: Path
    language: str = "fr"
    # The pairs the base branch's comparison left undecided (None: no comparison was made).
    needed: frozenset[tuple[str, str]] | None = None
    # The judgments file as the page names it (the project's relative path).
    shown: str = ""
    _questions: dict[str, Question] = field(init=False)
    _index: dict[tuple[str, str], int] = field(init=False)

    def __post_init__(self) -> None:
        problem = source_problem(self.source)
        if problem or not self.source.startswith("human:"):
            raise ValueError(problem or f"a judging page writes human:<name> judgments, not {self.source!r}")
        self._questions = {q.id: q for q in self.dataset.questions}
        self._index = {c.pair: i for i, c in enumerate(self.pool)}

    # reading ------------------------------------------------------------------------------
    def _lines(self) -> list[Judgment]:
        """The file's judgments, parsed again only when the file changed (another writer)."""
        return list(known_judgments(self.path).values())

    def judgments(self) -> dict[str, dict[str, Any]]:
        """For each pooled pair judged since the pool was made: the people's judgment that counts
        ("question<TAB>document" -> grade, source, date), and the LLM's proposals, by model."""
        people: dict[tuple[str, str], list[Judgment]] = {}
        proposals: dict[tuple[str, str], list[dict[str, Any]]] = {}
        for j in self._lines():
            if j.pair in self._index:
                if j.kind == "llm":
                    proposals.setdefault(j.pair, []).append({"model": j.name, "grade": j.grade})
                else:
                    people.setdefault(j.pair, []).append(j)
        out: dict[str, dict[str, Any]] = {}
        for pair in people.keys() | proposals.keys():
            chosen = winner(people.get(pair, []), accept_llm=False)
            out["\t".join(pair)] = {"judgment": _as_dict(chosen), "proposals": proposals.get(pair, [])}
        return out

    def state(self) -> dict[str, Any]:
        """The pairs of the pool (in order) and their judgments now."""
        needed = self.needed or frozenset()
        return {
            "dataset": self.dataset.name,
            "source": self.source,
            "file": self.shown or str(self.path),
            "filter": self.needed is not None,
            "pairs": [
                {
                    "question": c.question,
                    "document": c.document,
                    "hits": [list(h) for h in c.hits],
                    "needed": c.pair in needed,
                }
                for c in self.pool
            ],
            "judgments": self.judgments(),
        }

    def details(self, index: int) -> dict[str, Any]:
        """What the page shows of the pool's pair number `index`."""
        if not 0 <= index < len(self.pool):
            raise JudgingError(404, f"no pair {index}: the pool holds {len(self.pool)}")
        candidate = self.pool[index]
        needed = self.needed is not None and candidate.pair in self.needed
        question = self._questions[candidate.question]
        return {"index": index, **pair_details(self.dataset, question, candidate, self.language, needed)}

    # writing ------------------------------------------------------------------------------
    def _pair(self, body: Mapping[str, Any]) -> tuple[str, str]:
        pair = (body.get("question"), body.get("document"))
        if pair not in self._index:
            raise JudgingError(400, f"question {pair[0]!r}, document {pair[1]!r} is not a pair of this pool")
        return (str(pair[0]), str(pair[1]))

    @staticmethod
    def _grade(value: Any) -> int:
        if isinstance(value, bool) or not isinstance(value, int) or value not in GRADES:
            raise JudgingError(400, f"grade {value!r}: give 0, 1, 2 or 3")
        return value

    def judge(self, body: Mapping[str, Any]) -> dict[str, Any]:
        """Write the judge's grade of a pair (replacing theirs, if any): on disk before this returns.
        Returns the judgment written and the one it replaced (what an undo puts back)."""
        question, document = self._pair(body)
        new = Judgment(question, document, self._grade(body.get("grade")), self.source, timestamp())

        def write(current: dict[Key, Judgment]) -> Judgment | None:
            previous = current.get(new.key)
            current[new.key] = new
            return previous

        previous = update_judgments(self.path, self.lock, write)
        return {"judgment": _as_dict(new), "previous": _as_dict(previous), "judgments": self.judgments()}

    def undo(self, body: Mapping[str, Any]) -> dict[str, Any]:
        """Put back what a grade replaced (`previous`, or no judgment), only if the pair still holds
        the judgment that grade wrote (`written`); JudgingError 409 when it changed since."""
        question, document = self._pair(body)
        written, previous = body.get("written"), body.get("previous")
        expected = self._judgment(question, document, written, "written")
        restored = self._judgment(question, document, previous, "previous") if previous is not None else None

        def put_back(current: dict[Key, Judgment]) -> bool:
            if current.get(expected.key) != expected:
                return False
            if restored is None:
                del current[expected.key]
            else:
                current[expected.key] = restored
            return True

        if not update_judgments(self.path, self.lock, put_back):
            raise JudgingError(
                409, f"{question} / {document} was judged again since (another tab?): nothing undone, nothing lost"
            )
        return {"restored": _as_dict(restored), "judgments": self.judgments()}

    def _judgment(self, question: str, document: str, value: Any, what: str) -> Judgment:
        if not isinstance(value, Mapping) or not valid_date(value.get("date")):
            raise JudgingError(400, f"{what} must be a judgment (grade, date), got {value!r}")
        return Judgment(question, document, self._grade(value.get("grade")), self.source, value["date"])
