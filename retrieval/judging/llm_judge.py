"""The LLM judge: a recorded stage that proposes a grade, 0 to 3, for pooled pairs.

The prompt follows UMBRELA (Upadhyay et al., 2024, "UMBRELA: UMbrela is the (Open-Source
Reproduction of the) Bing RELevance Assessor"): the TREC-style scale 0-3, the steps intent (M),
trust (T) and overall (O), one grade per (query, passage) pair. It is versioned like the other
prompts: its bytes are part of each recorded request, so a change is a new JUDGE_VERSION and a
new recording.

Its calls go through the profile's LLM (the reranker's: rerank_provider, rerank_model) and, like
every call, through a cassette of their own (`cassettes/<profile>/judge-<model>.json`): `--record`
calls the model and records, the default replays the recording with the network closed, `--live`
calls without recording. Each grade is written to judgments.jsonl as `llm:<model>`: the gate counts
it only where the project sets `accept_llm_judgments = true`, and never over a person's judgment
(retrieval.data.judgment_merge). It judges every pair of the pool, people's too: those measure its
agreement with people (the report's Cohen's kappa); `holes_only` asks only about the others.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Sequence
from contextlib import nullcontext
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from pathlib import Path
from string import Template
from typing import Any

from retrieval.config import ConfigError, Settings
from retrieval.data.dataset import Dataset, Question
from retrieval.data.judgment_file import Judgment, Key, timestamp, update_judgments
from retrieval.judging.pool import Candidate
from retrieval.judging.session import GRADES
from retrieval.providers.base import GenerationProvider, ProviderError
from retrieval.recording.cassette_files import CassetteError
from retrieval.recording.recorder import Mode
from retrieval.run.cost import Usage

__all__ = ["JUDGE_SCHEMA", "JUDGE_VERSION", "LLMJudgeRun", "judge_with_llm", "parse_grade", "render_judge_prompt"]

JUDGE_VERSION = "judge-umbrela-v1"
# Part of the prompt version: the start of a passage is what an assessor reads first.
PASSAGE_CHARS = 2000
STAGE = "llm judge"  # its name in the usage and cost lines
# The range is the prompt's and parse_grade's: Gemini's schema takes no integer enum, OpenAI's strict
# mode no minimum or maximum.
JUDGE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"grade": {"type": "integer"}},
    "required": ["grade"],
    "additionalProperties": False,
}
# UMBRELA's own answer format, for a server that ignores the JSON schema.
_FINAL_SCORE = re.compile(r"##\s*final score\s*:\s*([0-3])\b", re.IGNORECASE)


@cache
def _template() -> Template:
    return Template(resources.files("retrieval.judging").joinpath(f"{JUDGE_VERSION}.txt").read_text(encoding="utf-8"))


def render_judge_prompt(query: str, title: str, text: str) -> str:
    """The judging prompt of one pair: a pure function of the query and the passage (whitespace
    collapsed, the passage cut at PASSAGE_CHARS), so a replay sends the recorded bytes."""
    passage = " ".join(f"{title}\n{text}".split() if title.strip() else text.split())
    if len(passage) > PASSAGE_CHARS:
        passage = passage[:PASSAGE_CHARS].rstrip() + " […]"
    return _template().substitute(query=" ".join(query.split()), passage=passage)


def parse_grade(raw: str) -> int:
    """The grade in the model's answer: {"grade": N} (N 0-3, or its digit as a string), or
    UMBRELA's "##final score: N"; ProviderError "unparseable" otherwise (that pair is not judged)."""
    try:
        data = json.loads(raw)
    except (json.JSONDecodeError, TypeError):
        data = None
    value = data.get("grade") if isinstance(data, dict) else None
    if isinstance(value, str) and value.strip() in {str(g) for g in GRADES}:
        value = int(value.strip())
    if isinstance(value, int) and not isinstance(value, bool) and value in GRADES:
        return value
    found = _FINAL_SCORE.search(str(raw)) if data is None else None
    if found:
        return int(found.group(1))
    raise ProviderError(f"judge answer has no grade from 0 to 3: {str(raw)[:120]!r}", "unparseable")


@dataclass
class LLMJudgeRun:
    """What one run of the LLM judge did: the grades it proposed, the pairs that failed (an
    outage: timeout, error answer, no grade), and its calls."""

    model: str
    source: str
    grades: dict[tuple[str, str], int] = field(default_factory=dict)
    failed: dict[tuple[str, str], str] = field(default_factory=dict)
    written: int = 0
    usage: Usage = field(default_factory=Usage)

    def summary(self, judgments_path: str | Path, accepted: bool) -> str:
        """The run in a few lines, as the command prints it."""
        counted = Counter(self.grades.values())
        spread = ", ".join(f"{g}: {counted.get(g, 0)}" for g in GRADES)
        lines = [
            f"{self.source} proposed a grade for {len(self.grades)} pair(s) ({spread}); {self.written} line(s) of "
            f"{judgments_path} written or changed; {self.usage.calls} call(s), {self.usage.input_tokens} input and "
            f"{self.usage.output_tokens} output tokens."
        ]
        if self.failed:
            reasons = Counter(self.failed.values()).most_common(3)
            lines.append(
                f"{len(self.failed)} pair(s) got no grade ({', '.join(f'{r}: {n}' for r, n in reasons)}): "
                "run it again for them."
            )
        lines.append(
            "These grades count: accept_llm_judgments = true (never over a person's judgment)."
            if accepted
            else "These grades do not count until the project sets accept_llm_judgments = true; the report "
            "measures their agreement with people's judgments (`python -m retrieval`)."
        )
        return "\n".join(lines)


def _ask(generator: GenerationProvider, dataset: Dataset, question: Question, pair: Candidate) -> int | ProviderError:
    from retrieval.methods.support.llm import ask_or_degrade

    document = dataset.documents[dataset.positions[pair.document]]
    prompt = render_judge_prompt(question.text, document.title, document.text)
    return ask_or_degrade(
        lambda: parse_grade(generator.generate_json(prompt, JUDGE_SCHEMA, "judgment")),
        f"judgment of question {pair.question}, document {pair.document}",
        generator.model,
    )


def judge_with_llm(
    settings: Settings,
    dataset: Dataset,
    pairs: Sequence[Candidate],
    mode: Mode,
    judgments_path: str | Path,
    lock: str | Path,
) -> LLMJudgeRun:
    """Ask the profile's LLM for a grade of each pair, through the `judge-<model>` cassette in
    `mode`, then write every grade at once to the judgments file as `llm:<model>` (a grade the
    file already holds from that model keeps its date). A replay miss or a missing key stops the
    run before anything is written; an outage only costs that pair its grade."""
    from retrieval.evaluation.corpus_vectors import recorder_for
    from retrieval.methods.support.llm import channel_for, map_in_order
    from retrieval.providers import make_generator
    from retrieval.recording.network import closed_network

    profile = settings.profile
    if not profile.llm.configured:
        raise ConfigError(
            f"profile {profile.name!r} has no LLM (rerank_provider, rerank_model): the LLM judge uses the profile's "
            "LLM. Give one with --profile, or set rerank_provider and rerank_model in its table."
        )
    generator = make_generator(profile, replay=mode == "replay")
    assert generator is not None  # configured, checked above
    run = LLMJudgeRun(generator.model, f"llm:{generator.model}")
    if not pairs:
        return run
    recorder = recorder_for(settings, mode)
    channel = channel_for("judge", generator.model)
    if mode == "replay" and not recorder.has(channel):
        raise CassetteError(
            f"no cassette {recorder.path(channel)}: the LLM judge was never recorded with {generator.model}. Record it "
            "with `python -m retrieval judge --llm --record` (it calls the model: its key or server), or call the "
            "model without recording: `python -m retrieval judge --llm --live`."
        )
    questions = {q.id: q for q in dataset.questions}
    generator.usage = run.usage
    with closed_network() if mode == "replay" else nullcontext(), recorder.stage(channel):
        answers = map_in_order(
            lambda i: _ask(generator, dataset, questions[pairs[i].question], pairs[i]), len(pairs), profile.llm.workers
        )
    for pair, answer in zip(pairs, answers, strict=True):
        if isinstance(answer, ProviderError):
            run.failed[pair.pair] = answer.reason
        else:
            run.grades[pair.pair] = answer
    if mode == "record":
        recorder.commit({"usage": {STAGE: run.usage.as_dict()}, "judge": {"prompt": JUDGE_VERSION}})
    now = timestamp()

    def write(current: dict[Key, Judgment]) -> int:
        changed = 0
        for (question, document), grade in run.grades.items():
            key = (question, document, run.source)
            if current.get(key) is None or current[key].grade != grade:
                current[key] = Judgment(question, document, grade, run.source, now)
                changed += 1
        return changed

    run.written = update_judgments(judgments_path, lock, write)
    return run
