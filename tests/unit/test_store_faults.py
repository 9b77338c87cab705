"""The recording set under faults, with real processes: two recordings at once, a recording killed
(SIGKILL) at each point of its commit and the next run of each kind after it.

The recordings are real (the fake embeddings server, a FIXTURE, answers them); each child process is
`recording_child.py`, stopped where the test says."""

from __future__ import annotations

import atexit
import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from dataset_files import write_dataset
from fake_embeddings import FakeEmbeddingsServer
from recording_child import POINTS, Recordings, dataset, settings

from retrieval.cli import main
from retrieval.config import load_settings
from retrieval.data.dataset import load_dataset
from retrieval.evaluation.evaluate import StagedRecording, evaluate
from retrieval.gate.accept import accept
from retrieval.gate.result import run_gate
from retrieval.recording.cassette_files import CassetteError

RECORDINGS = Recordings()
atexit.register(RECORDINGS.close)
# A child reaches its point in a few seconds (imports, a recording of 64 documents); far more on a loaded machine.
REACH_SECONDS = 120


def _files(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())} if folder.is_dir() else {}


def _project(root: Path) -> dict[str, dict[str, bytes]]:
    """The recording set as the repository would commit it: the cassettes and the segments."""
    return {"cassettes": _files(root / "cassettes" / "fixture"), "vectors": _files(root / "vectors" / "fixture")}


def _leftovers(root: Path) -> list[str]:
    return sorted(p.name for p in (root / "cassettes").iterdir() if p.name != "fixture")


class Child:
    """A recording process started on `root`, stopped at `pause` (forked by RECORDINGS)."""

    def __init__(self, root: Path, url: str, pause: str | None, edited: bool = True) -> None:
        self.marker = root / f"reached-{len(list(root.glob('reached-*')))}"
        spec = root / f"{self.marker.name}.json"
        self.stderr, self.go = root / f"{self.marker.name}.stderr", root / f"{self.marker.name}.go"
        os.mkfifo(self.go)
        spec.write_text(
            json.dumps(
                {
                    "root": str(root),
                    "url": url,
                    "pause": pause,
                    "marker": str(self.marker),
                    "edited": edited,
                    "go": str(self.go),
                    "stderr": str(self.stderr),
                }
            )
        )
        self.pid = RECORDINGS.start(spec)

    def reached(self) -> None:
        deadline = time.monotonic() + REACH_SECONDS
        while not self.marker.exists():
            code = RECORDINGS.ended(0.01)  # how soon the marker is seen (a wait for the child's end)
            if code is not None:
                raise AssertionError(f"the child ended ({code}): {self.stderr.read_text()}")
            if time.monotonic() > deadline:
                RECORDINGS.stop_live()
                raise AssertionError("the child never reached its point")

    def kill(self) -> None:
        os.kill(self.pid, signal.SIGKILL)
        assert RECORDINGS.ended(30) == -signal.SIGKILL

    def finish(self) -> str:
        """Let a child stopped at "staged" commit; its stderr."""
        with self.go.open("w") as go:
            go.write("go\n")
        code = RECORDINGS.ended(REACH_SECONDS)
        err = self.stderr.read_text()
        assert code == 0, err
        return err


@pytest.fixture(scope="module")
def recorded_once(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, str]]:
    """Set A recorded once for the module (in this process), with a cassette of a stage no later
    recording re-records, and the server it was recorded from, kept running: its folder and URL.
    A recording names no folder of its own (its files are the same under any root)."""
    server = FakeEmbeddingsServer()
    folder = tmp_path_factory.mktemp("recorded")
    try:
        evaluate(dataset(folder), settings(folder, server.url), mode="record")
        (folder / "cassettes" / "fixture" / "rerank-m.json").write_text('{"interactions": [{"kept": true}]}')
        yield folder, server.url
    finally:
        server.stop()


@pytest.fixture
def recorded(tmp_path: Path, recorded_once: tuple[Path, str]) -> Iterator[tuple[Path, str]]:
    """A project whose set A is committed (a copy of `recorded_once`), and the server's URL."""
    folder, url = recorded_once
    shutil.copytree(folder, tmp_path, dirs_exist_ok=True)
    yield tmp_path, url
    RECORDINGS.stop_live()  # a test that failed with its child stopped at its point


def test_a_second_recording_is_refused_in_one_line_and_removes_nothing(recorded: tuple[Path, str]) -> None:
    root, url = recorded
    first = Child(root, url, "staged")  # its segment written, its set staged: it holds the lock
    first.reached()
    staged = _project(root)
    with pytest.raises(CassetteError) as caught:
        evaluate(dataset(root, edited=True), settings(root, url, edited=True), mode="record")
    lock = root / "cache" / "recording-fixture.lock"
    assert str(caught.value) == (
        f"{root / 'cassettes' / 'fixture'}: another run is recording or compacting profile 'fixture' (it holds "
        f"{lock}); nothing was changed. Let it finish, then run again."
    )
    assert _project(root) == staged  # the first one's segment files are all there
    first.finish()
    # The first one's set is committed whole, and replays; a recording after it is not refused.
    evaluate(dataset(root, edited=True), settings(root, url, edited=True), mode="replay")
    evaluate(dataset(root, edited=True), settings(root, url, edited=True), mode="record")
    evaluate(dataset(root, edited=True), settings(root, url, edited=True), mode="replay")


def test_a_recording_interrupted_after_another_committed_keeps_that_ones_segments(
    recorded: tuple[Path, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # The two recordings write the same segment (the same edit): the one interrupted removes only the
    # files it wrote itself, never a file the committed manifest lists.
    root, url = recorded
    evaluate(dataset(root, edited=True), settings(root, url, edited=True), mode="record")
    committed = _project(root)

    def interrupted(*args: object, **kwargs: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr("retrieval.evaluation.evaluate._commit_recording", interrupted)
    with pytest.raises(KeyboardInterrupt):
        evaluate(dataset(root, edited=True), settings(root, url, edited=True), mode="record")
    monkeypatch.undo()
    assert _project(root) == committed
    evaluate(dataset(root, edited=True), settings(root, url, edited=True), mode="replay")


def _recover_by(kind: str, root: Path, url: str) -> None:
    """The next run after the kill, of each kind a user or CI starts."""
    if kind == "replay":
        evaluate(dataset(root), settings(root, url), mode="replay")
    elif kind == "--update-baseline":
        accept(run_gate(settings(root, url)))
    else:
        evaluate(dataset(root), settings(root, url), mode="record")


# (point, the set it leaves, the next run); each point is recovered by one kind of run, the fallback
# swap's middle by all. Each case is a recording process killed (1.5-3 s of CPU): three stay in the
# default run, one for each kind of next run, the others are CI's slow job. What a kill at each point
# leaves and how the next run puts it back is tested fast on the file sets themselves
# (test_atomic_set.py: a run killed between the two renames, a failed rollback, a live process).
KILLS: list[tuple[str, str, str, pytest.MarkDecorator | tuple[()]]] = [
    ("before swap", "old", "replay", pytest.mark.slow),
    ("after exchange", "new", "--update-baseline", ()),
    ("renamed away", "old", "replay", ()),
    ("renamed away", "old", "--update-baseline", pytest.mark.slow),
    ("renamed away", "old", "--record", pytest.mark.slow),
    ("renamed in", "new", "replay", pytest.mark.slow),
    ("after swap", "new", "--record", ()),
]


@pytest.mark.parametrize(
    ("point", "left", "kind"),
    [pytest.param(p, left, k, marks=marks, id=f"{p}, then {k}") for p, left, k, marks in KILLS],
)
def test_a_recording_killed_at_any_point_of_its_commit_leaves_the_old_or_the_new_set(
    recorded: tuple[Path, str], point: str, left: str, kind: str
) -> None:
    assert point in POINTS
    root, url = recorded
    old = _project(root)["cassettes"]
    child = Child(root, url, point)
    child.reached()
    child.kill()
    _recover_by(kind, root, url)
    assert _leftovers(root) == []  # no staging folder, no set moved aside
    cassettes = _project(root)["cassettes"]
    assert cassettes["rerank-m.json"] == old["rerank-m.json"]  # the set is whole, never rebuilt from nothing
    if kind == "--record":
        return  # a new set of its own, recorded over the one put back
    manifest = json.loads(cassettes["corpus-vectors.json"])
    counts = [s["count"] for s in manifest["segments"]]
    if left == "old":
        assert cassettes == old and counts == [64]
    else:
        assert counts == [64, 1] and cassettes != old  # the edited document's vector committed
        assert json.loads(cassettes["recording.json"])["fingerprint"] == dataset(root, edited=True).fingerprint
    evaluate(dataset(root), settings(root, url), mode="replay")  # what is in place replays


# --- a full disk and read-only folders under a real `pytest --record` ----------------------------------
#
# A real file system refuses: a tmpfs of a few pages (full after the first new file), or a read-only
# bind mount, in a mount namespace of the recording's own (`unshare`), so nothing is mounted on the
# machine and the mounts end with the run.

ADOPTER = """[project]
name = "adopter"
version = "0"

[tool.retrieval]
dataset = "data/qa"
methods = ["bm25", "vector", "hybrid"]
profile = "fake"

[tool.retrieval.profiles.fake]
embedding_provider = "openai"
embedding_model = "fixture-e5"
embedding_base_url = "{url}/v1"
dimensions = 4
input_type = true
"""
DOCUMENTS = [
    {"id": "d1", "title": "Restaurer une sauvegarde", "text": "Ouvrez la console et lancez la restauration."},
    {"id": "d2", "title": "Réinitialiser le mot de passe", "text": "Cliquez sur mot de passe oublié."},
    {"id": "d3", "title": "Exporter les données", "text": "Le bouton exporter produit un fichier CSV."},
]
QUESTIONS = [
    {"id": "q1", "text": "restaurer une sauvegarde", "type": "exact", "relevant": ["d1"]},
    {"id": "q2", "text": "mot de passe oublié", "type": "exact", "relevant": ["d2"]},
]
PAGE = 4096  # tmpfs counts whole pages: each small file takes one


def _namespaces() -> bool:
    try:
        return subprocess.run(["unshare", "-rm", "true"], capture_output=True, timeout=30).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


needs_namespaces = pytest.mark.skipif(
    not _namespaces(),
    reason="no user and mount namespaces (unshare -rm): the same faults are injected in process by "
    "test_vector_store.py and test_recording_faults.py instead",
)


@pytest.fixture
def adopter(tmp_path: Path, embeddings_server: FakeEmbeddingsServer) -> Path:
    """FIXTURE: an adopter's project whose recording is committed, then one document edited: the next
    `pytest --record` writes a new segment and a new set."""
    (tmp_path / "data" / "qa").mkdir(parents=True)
    write_dataset(tmp_path / "data" / "qa", DOCUMENTS, QUESTIONS)
    (tmp_path / "pyproject.toml").write_text(ADOPTER.format(url=embeddings_server.url))
    project = load_settings(tmp_path, environ={})
    evaluate(load_dataset(project.dataset), project, mode="record")  # what `pytest --record` committed
    write_dataset(tmp_path / "data" / "qa", [{**DOCUMENTS[0], "text": "Tout autre texte."}, *DOCUMENTS[1:]], QUESTIONS)
    return tmp_path


PYTEST = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:randomly", "-q"]
LISTING = "find cassettes vectors | LC_ALL=C sort; find cassettes vectors -type f -exec sha256sum {} + | LC_ALL=C sort"


def _listing(root: Path) -> str:
    return subprocess.run(["sh", "-c", LISTING], cwd=root, capture_output=True, text=True, check=True).stdout


def _pages(folder: Path) -> int:
    return sum(1 for p in folder.rglob("*") if p.is_file())


@pytest.mark.slow  # a shell re-run of the whole recording in a mount namespace per case
@needs_namespaces
@pytest.mark.parametrize(
    ("fault", "folder", "extra", "reason"),
    [
        ("full", "vectors/fake", 1, "No space left on device"),
        ("full", "cassettes", 0, "No space left on device"),
        ("full", "cassettes", 1, "No space left on device"),
        ("read-only", "vectors/fake", 0, "Read-only file system"),
        ("read-only", "cassettes", 0, "Read-only file system"),
    ],
    ids=[
        "full vectors, at the new segment's vectors",
        "full cassettes, at the staged manifest",
        "full cassettes, at the staged question cassette",
        "read-only vectors",
        "read-only cassettes",
    ],
)
def test_a_full_or_read_only_folder_under_record_is_one_line_naming_it_and_leaves_nothing(
    adopter: Path, fault: str, folder: str, extra: int, reason: str
) -> None:
    before = _listing(adopter)
    saved = adopter / "saved"
    shutil.copytree(adopter / folder, saved)
    if fault == "full":  # room for the files there and `extra` more pages (a small file takes one)
        mount = f"mount -t tmpfs -o size={(_pages(saved) + extra) * PAGE} tmpfs {folder} && cp -a saved/. {folder}/"
    else:
        mount = f"mount --bind {folder} {folder} && mount -o remount,bind,ro {folder}"
    script = f"{mount} && {shlex.join([*PYTEST, '--record'])} > out.txt 2>&1; ({LISTING}) > after.txt"
    subprocess.run(["unshare", "-rm", "sh", "-c", script], cwd=adopter, check=True, timeout=600)
    shutil.rmtree(saved)
    out = (adopter / "out.txt").read_text()
    assert (adopter / "after.txt").read_text() == before  # no orphan segment file, no staging folder
    assert "Traceback" not in out
    named = adopter / folder
    expected = (
        f"CassetteError: {named}: the vector segment could not be written ({reason}); free space on its disk or make "
        "the folder writable, then run again. The recording was discarded; the committed files are as they were."
        if folder.startswith("vectors")
        else f"CassetteError: {named}: the recording could not be written there ({reason}); free space on its disk "
        "or make the folder writable, then record again. Nothing was replaced."
    )
    assert f"retrieval gate (profile fake): nothing compared: {expected}" in out.splitlines()


# --- --compact-store --------------------------------------------------------------------------------------


def _compact(root: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    monkeypatch.chdir(root)
    code = main(["--compact-store"])
    return code, capsys.readouterr().err


def test_compacting_a_damaged_store_is_one_line_and_changes_nothing(
    adopter: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    [segment] = (adopter / "vectors" / "fake").glob("seg-*.vectors.npy")
    segment.write_bytes(segment.read_bytes()[:-4])
    before = _listing(adopter)
    code, err = _compact(adopter, monkeypatch, capsys)
    assert (code, err) == (
        2,
        f"error: {segment}: damaged vector segment (not the sha256 corpus-vectors.json lists); restore it with "
        f"`git checkout -- {adopter / 'cassettes' / 'fake'} {adopter / 'vectors' / 'fake'}` or re-record with "
        "`pytest --record --retrieval-profile fake`\n",
    )
    assert _listing(adopter) == before


def test_compacting_during_a_recording_is_refused_in_one_line(
    adopter: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    project = load_settings(adopter, environ={})
    staged: list[StagedRecording] = []
    evaluate(load_dataset(project.dataset), project, mode="record", on_staged=staged.append)
    before = _listing(adopter)  # the recording's new segment written, not yet listed: compaction would drop it
    try:
        code, err = _compact(adopter, monkeypatch, capsys)
    finally:
        staged[0].commit()
    lock = adopter / ".cache" / "recording-fake.lock"
    assert (code, err) == (
        2,
        f"error: {adopter / 'cassettes' / 'fake'}: another run is recording or compacting profile 'fake' (it holds "
        f"{lock}); nothing was changed. Let it finish, then run again.\n",
    )
    assert before != _listing(adopter)  # the recording committed, its segment kept
    code, err = _compact(adopter, monkeypatch, capsys)
    assert code == 0 and err.startswith(f"{adopter / 'cassettes' / 'fake' / 'corpus-vectors.json'}: compacted, ")
    evaluate(load_dataset(project.dataset), project, mode="replay")
