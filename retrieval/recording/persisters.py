"""vcrpy's persisters of the recorder (retrieval.recording.recorder): replay loads a cassette checked by
`read_cassette` and never saves; a live run counts its calls in a cassette that is never saved."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from retrieval.recording.cassette_files import CassetteError, read_cassette

__all__ = ["CODE_KEY", "CheckedLoad", "counted_live"]

# The key of an HTTP cassette that holds the digests of its method's declared `sources` (vcrpy
# reads only "interactions"): the code of a service in the repository that replay does not run.
CODE_KEY = "code"


class _Parsed:
    """A vcrpy serializer for a cassette `read_cassette` already parsed."""

    @staticmethod
    def deserialize(data: dict[str, Any]) -> dict[str, Any]:
        return data


@dataclass(frozen=True)
class CheckedLoad:
    """vcrpy's persister for replay: the cassette is parsed once, by `read_cassette`, which also
    checks it (vcrpy alone treats a cassette it cannot decode as empty, and replay would then
    report misses instead of the damage), and, for a method that declares `sources`, checked to
    be recorded from the same sources (`code`). Replay never saves."""

    profile: str
    code: dict[str, str] | None = None

    def load_cassette(self, cassette_path: str, serializer: Any) -> Any:
        from vcr.serialize import deserialize

        from retrieval.recording.ranking_cassettes import code_changed

        data = read_cassette(Path(cassette_path), self.profile)
        if self.code:
            code_changed(Path(cassette_path), self.code, data.get(CODE_KEY), required=True, what="answers")
        return deserialize(data, _Parsed)

    def save_cassette(self, cassette_path: str, cassette_dict: Any, serializer: Any) -> None:
        raise CassetteError(f"{cassette_path}: a replay tried to write its cassette")


class _Unsaved:
    """vcrpy's persister for counting a live run's calls: nothing to load, nothing saved."""

    def load_cassette(self, cassette_path: str, serializer: Any) -> Any:
        from vcr.persisters.filesystem import CassetteNotFoundError

        raise CassetteNotFoundError(cassette_path)

    def save_cassette(self, cassette_path: str, cassette_dict: Any, serializer: Any) -> None:
        return None


@contextmanager
def counted_live() -> Iterator[Any]:
    """A cassette that records what the block sends, in memory only: its `data` counts the calls."""
    import vcr

    recorder = vcr.VCR(record_mode="all", record_on_exception=False)
    recorder.register_persister(_Unsaved())
    with recorder.use_cassette("live-calls-not-saved") as cassette:
        yield cassette
