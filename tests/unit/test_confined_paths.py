"""Nothing the tool reads as the project's or writes lands outside the project: every path the
project file or the defaults name resolves inside the root, links resolved, else one line naming
the key, the file and the line (exit 2, nothing written); a folder replaced as a set is never a
link, so no staging or swap folder follows one or is left as one."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from demo_fixture import DEMO_PROJECT

from retrieval.cli import main
from retrieval.config import ConfigError, load_settings
from retrieval.files.atomic import AtomicSetError, replace_files, staging_directory
from retrieval.recording.cassette_files import CassetteError
from retrieval.recording.recorder import Recorder

FIX = "nothing the tool reads or writes for the project may leave it ({root}): give a path inside it."


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """The demo project (its data, recordings and baseline) in tmp_path/project; tmp_path/outside beside it."""
    root = tmp_path / "project"
    for item in ("data/demo", "cassettes/local", "vectors/local", "baselines"):
        shutil.copytree(DEMO_PROJECT / item, root / item)
    (tmp_path / "outside").mkdir()
    return root


def _write_project(root: Path, lines: str) -> Path:
    path = root / "retrieval.toml"
    path.write_text(f'# the project\nprofile = "local"\n{lines}\n')
    return path


@pytest.mark.parametrize(
    ("key", "value", "lands"),
    [
        ("baseline", "../../outside/m.json", "{tmp}/outside/m.json"),
        ("snapshots", "{tmp}/outside/rankings", "{tmp}/outside/rankings"),
        ("cache", "{tmp}/outside/cache", "{tmp}/outside/cache"),
        ("dataset", "../outside/data", "{tmp}/outside/data"),
        ("cassettes", "../outside/cassettes", "{tmp}/outside/cassettes"),
        ("vectors", "../outside/vectors", "{tmp}/outside/vectors"),
    ],
)
def test_a_path_outside_the_project_is_one_line_naming_the_key_file_and_line(
    project: Path, key: str, value: str, lands: str
) -> None:
    tmp = project.parent
    # baseline's ../../ from a subfolder: climbing out through one.
    (project / "baselines").mkdir(exist_ok=True)
    written = value.format(tmp=tmp)
    path = _write_project(project, f'{key} = "{written}"')
    with pytest.raises(ConfigError) as caught:
        load_settings(project, environ={})
    resolved = Path(lands.format(tmp=tmp)).resolve() if key != "baseline" else (project / written).resolve()
    assert str(caught.value) == (
        f"{path}, line 3: {key} = {written!r} resolves to {resolved}, outside the project: "
        + FIX.format(root=project.resolve())
    )


def test_a_link_inside_the_project_to_outside_is_resolved_and_refused(project: Path) -> None:
    (project / ".cache").symlink_to(project.parent / "outside", target_is_directory=True)
    path = _write_project(project, 'cache = ".cache"')
    with pytest.raises(ConfigError) as caught:
        load_settings(project, environ={})
    assert str(caught.value).startswith(
        f"{path}, line 3: cache = '.cache' resolves to {(project.parent / 'outside').resolve()}, outside the project"
    )


def test_a_default_path_linked_outside_is_refused_too(project: Path) -> None:
    # Not written in the project file: the built-in default `.cache`, a link to elsewhere.
    (project / ".cache").symlink_to(project.parent / "outside", target_is_directory=True)
    path = _write_project(project, "k = 5")
    with pytest.raises(ConfigError, match=rf"^{path}: cache = '.cache' resolves to .*, outside the project: "):
        load_settings(project, environ={})


@pytest.mark.parametrize(
    ("folder", "key"), [("cassettes/local", "cassettes"), ("vectors/local", "vectors (beside cassettes)")]
)
def test_a_profile_folder_linked_outside_is_refused(project: Path, folder: str, key: str) -> None:
    shutil.rmtree(project / folder)
    (project / folder).symlink_to(project.parent / "outside", target_is_directory=True)
    path = _write_project(project, "k = 5")
    with pytest.raises(ConfigError) as caught:
        load_settings(project, environ={})
    assert str(caught.value) == (
        f"{path}: {key}: the profile's folder {folder} is a link to {(project.parent / 'outside').resolve()}, "
        "outside the project: " + FIX.format(root=project.resolve())
    )


def test_the_vectors_key_is_named_when_written(project: Path) -> None:
    (project / "store").mkdir()
    (project / "store" / "local").symlink_to(project.parent / "outside", target_is_directory=True)
    path = _write_project(project, 'vectors = "store"')
    with pytest.raises(ConfigError, match=rf"^{path}, line 3: vectors: the profile's folder store/local is a link to "):
        load_settings(project, environ={})


def test_paths_and_links_inside_the_project_are_kept(project: Path) -> None:
    (project / "work" / "cache").mkdir(parents=True)
    (project / ".cache").symlink_to(project / "work" / "cache", target_is_directory=True)
    _write_project(project, 'cache = ".cache"\nbaseline = "baselines/../baselines/metrics.json"')
    settings = load_settings(project, environ={})
    assert (settings.cache, settings.baseline) == (
        str(project / ".cache"),
        str(project / "baselines/../baselines/metrics.json"),
    )


def test_a_path_given_as_a_flag_is_the_users_own(project: Path) -> None:
    _write_project(project, "k = 5")
    outside = project.parent / "outside"
    assert load_settings(project, {"dataset": str(outside)}, environ={}).dataset == str(outside)


def test_the_cli_says_it_in_one_line_and_writes_nothing_outside(
    project: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    shutil.rmtree(project / "vectors/local")
    (project / "vectors/local").symlink_to(project.parent / "outside", target_is_directory=True)
    _write_project(project, 'methods = ["bm25", "vector"]')
    monkeypatch.chdir(project)
    assert main(["--record"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("error: ") and "the profile's folder vectors/local is a link" in err
    assert list((project.parent / "outside").iterdir()) == []


# --- folders replaced as a set ---------------------------------------------------------------


@pytest.fixture
def linked(tmp_path: Path) -> Path:
    """cassettes/local, a link to a folder elsewhere holding one cassette."""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "search.json").write_text('{"interactions": []}')
    (tmp_path / "cassettes").mkdir()
    link = tmp_path / "cassettes" / "local"
    link.symlink_to(elsewhere, target_is_directory=True)
    return link


def _untouched(link: Path) -> None:
    elsewhere = link.parent.parent / "elsewhere"
    assert link.is_symlink() and link.resolve() == elsewhere.resolve()
    assert [p.name for p in link.parent.iterdir()] == ["local"]  # no staging or swap folder beside it
    assert [p.name for p in elsewhere.iterdir()] == ["search.json"]


def test_replacing_a_linked_folder_is_refused_before_anything_is_written(linked: Path) -> None:
    with pytest.raises(AtomicSetError) as caught:
        replace_files(linked, {"search.json": b"new", "recording.json": b"{}"})
    assert caught.value.filename == str(linked) and str(caught.value.strerror).startswith("a symbolic link (to ")
    _untouched(linked)


def test_no_staging_folder_is_made_beside_a_link(linked: Path) -> None:
    with pytest.raises(AtomicSetError):
        staging_directory(linked)
    _untouched(linked)


def test_a_recording_into_a_linked_profile_folder_stops_before_its_first_call(linked: Path) -> None:
    recorder = Recorder("record", linked, "local")
    with pytest.raises(CassetteError) as raised, recorder.stage("search"):
        pytest.fail("the stage must not start")  # pragma: no cover
    assert isinstance(raised.value.__cause__, AtomicSetError)
    assert "symbolic link" in str(raised.value) and "free space" not in str(raised.value)
    assert "\n" not in str(raised.value)
    _untouched(linked)
