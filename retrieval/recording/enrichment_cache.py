"""The enrichment cache: the questions an LLM wrote for each document, keyed by the document's
content, the model and the prompt version.

Like the corpus embedding cache, a second live run asks the model nothing, and editing one
document enriches only that one. One JSON file per (provider, model, prompt version, endpoint)
under `<cache>/enrichment/`, written atomically with a checksum: a damaged file is rebuilt,
never trusted.
"""

from __future__ import annotations

import hashlib
import json
import re
import warnings
from collections.abc import Mapping
from pathlib import Path

from retrieval.files.atomic import atomic_write_text
from retrieval.recording.cache import text_key

__all__ = ["EnrichmentCache"]

FORMAT = "retrieval-enrichment-cache-1"


def _checksum(entries: Mapping[str, list[str]]) -> str:
    canonical = json.dumps(entries, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(f"{FORMAT}\n{canonical}".encode()).hexdigest()


class EnrichmentCache:
    """Questions by document content for one provider/model/prompt version; loaded whole, saved atomically."""

    def __init__(self, root: str | Path, provider: str, model: str, version: str, variant: str = "") -> None:
        # `variant` stands for whatever else changes the answers (the endpoint).
        slug = re.sub(r"[^A-Za-z0-9_.-]+", "_", "--".join(filter(None, (provider, model, version, variant))))
        self.path = Path(root) / "enrichment" / f"{slug}.json"
        self._entries: dict[str, list[str]] = {}
        self._dirty = False
        self.hits = 0
        self.misses = 0
        self._load()

    def _load(self) -> None:
        if not self.path.exists():
            return
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
            entries = data["entries"]
            if data.get("format") != FORMAT or data.get("checksum") != _checksum(entries):
                raise ValueError("checksum mismatch")
            if not all(isinstance(v, list) and all(isinstance(q, str) for q in v) for v in entries.values()):
                raise ValueError("entries are not lists of questions")
        except Exception as exc:  # whatever is wrong with the file, it is rebuilt, never trusted
            warnings.warn(f"{self.path}: corrupt enrichment cache ({exc}); it will be rebuilt", stacklevel=2)
            self._dirty = True
            return
        self._entries = entries

    def get(self, content: str) -> list[str] | None:
        """The cached questions of a document's content, or None when it must be enriched."""
        found = self._entries.get(text_key(content))
        if found is None:
            self.misses += 1
        else:
            self.hits += 1
        return None if found is None else list(found)

    def put(self, content: str, questions: list[str]) -> None:
        """Remember a document's questions (saved by `save`)."""
        self._entries[text_key(content)] = list(questions)
        self._dirty = True

    def save(self) -> None:
        """Write the cache atomically if anything changed."""
        if not self._dirty:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        entries = dict(sorted(self._entries.items()))
        text = json.dumps({"format": FORMAT, "checksum": _checksum(entries), "entries": entries}, ensure_ascii=False)
        atomic_write_text(self.path, text + "\n")
        self._dirty = False
