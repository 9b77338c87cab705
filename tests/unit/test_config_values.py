"""Values and names the configuration refuses at load, in one line naming the file, the line and
the fix: bools where numbers are expected, negative or all-zero hybrid weights, unsafe profile
and method names, shared cassette names, a negative baseline tolerance."""

from __future__ import annotations

import json
from dataclasses import fields
from pathlib import Path

import pytest

from retrieval.config import ConfigError, load_settings
from retrieval.config.names import RANKINGS, RESERVED_CASSETTES
from retrieval.config.setting_values import NUMBERS
from retrieval.config.settings import GROUPS, Settings
from retrieval.evaluation.corpus_vectors import LEGACY_STAGE
from retrieval.evaluation.evaluate import QUESTION_STAGE
from retrieval.evaluation.pipeline import plan
from retrieval.recording.cassette_files import META_FILE
from retrieval.recording.ranking_cassettes import SUFFIX

NO_ENV: dict[str, str] = {}


def _refused(tmp_path: Path, text: str, overrides: dict | None = None) -> str:
    (tmp_path / "retrieval.toml").write_text(text, encoding="utf-8")
    with pytest.raises(ConfigError) as caught:
        load_settings(tmp_path, overrides, environ=NO_ENV)
    message = str(caught.value)
    assert "\n" not in message
    return message


# --- bools where numbers are expected ---------------------------------------------------------


@pytest.mark.parametrize("key", sorted(NUMBERS))
def test_a_bool_is_no_number_for_any_run_setting(tmp_path: Path, key: str) -> None:
    # `k = true` was read as 1: Python's bool is an int.
    integer, least, highest = NUMBERS[key]
    wanted = (
        f"an integer >= {least}"
        if integer
        else "a finite number >= 0"
        if key == "bm25_k1"
        else f"a number from {least:g} to {highest:g}"
    )
    path = tmp_path / "retrieval.toml"
    assert _refused(tmp_path, f"# settings\n{key} = true\n") == f"{path}, line 2: {key} must be {wanted}, got True."


def test_a_bool_flag_is_no_number(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as caught:
        load_settings(tmp_path, {"k": True}, environ=NO_ENV)
    assert str(caught.value) == "--k must be an integer >= 1, got True."
    with pytest.raises(ConfigError) as caught:
        load_settings(tmp_path, {"rerank_workers": True}, environ=NO_ENV)
    assert str(caught.value) == "--workers must be at least 1, got True."


def _numeric_profile_fields() -> list[tuple[str, str, type]]:
    found = []
    for group, cls in GROUPS.items():
        for f in fields(cls):
            default = getattr(cls(), f.name)
            if type(default) in (int, float):
                found.append((group, f.name, type(default)))
    return found


def test_every_numeric_profile_field_is_listed() -> None:
    # Guards the parametrisation below: a new numeric field is tested without editing this file.
    assert {(g, k) for g, k, _ in _numeric_profile_fields()} >= {
        ("llm", "workers"),
        ("embeddings", "dimensions"),
        ("embeddings", "batch_size"),
        ("retries", "timeout"),
        ("retries", "attempts"),
    }


@pytest.mark.parametrize(("group", "key", "kind"), _numeric_profile_fields())
def test_a_bool_is_no_number_for_any_profile_setting(tmp_path: Path, group: str, key: str, kind: type) -> None:
    path = tmp_path / "retrieval.toml"
    message = _refused(tmp_path, f"[profiles.local.{group}]\n{key} = true\n")
    wanted = "of type int" if kind is int else "a finite number"
    assert message == (f"{path}, line 2: profile 'local': {group}.{key} must be {wanted}, got True. Fix the value.")


def test_rerank_workers_true_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "retrieval.toml"
    assert _refused(tmp_path, "[profiles.local]\nrerank_workers = true\n") == (
        f"{path}, line 2: profile 'local': rerank_workers must be of type int, got True. Fix the value."
    )


@pytest.mark.parametrize("value", ["true", "inf", "nan"])
def test_a_float_profile_setting_must_be_finite(tmp_path: Path, value: str) -> None:
    path = tmp_path / "retrieval.toml"
    shown = {"true": "True", "inf": "inf", "nan": "nan"}[value]
    assert _refused(tmp_path, f"[profiles.local]\ntimeout = {value}\n") == (
        f"{path}, line 2: profile 'local': timeout must be a finite number, got {shown}. Fix the value."
    )


def test_a_bool_price_is_refused(tmp_path: Path) -> None:
    message = _refused(tmp_path, '[prices."m"]\ninput = true\n')
    assert message.startswith(f'{tmp_path / "retrieval.toml"}, line 1: prices."m" must be a table of numbers >= 0')


# --- hybrid weights ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "weights", ["[-0.5, 1.0]", "[1.0, -1]", "[true, 1.0]", "[0.0, 0.0]", "[1.0]", "[nan, 1.0]", '["1", 1]']
)
def test_bad_hybrid_weights_are_one_line_at_load(tmp_path: Path, weights: str) -> None:
    path = tmp_path / "retrieval.toml"
    shown = repr(json.loads(weights.replace("nan", "NaN").replace("true", "true")))
    message = _refused(tmp_path, f"k = 5\nhybrid_weights = {weights}\n")
    assert message == (
        f"{path}, line 2: hybrid_weights must give one finite number >= 0 per hybrid input ['bm25', 'vector'], "
        f"at least one of them above 0, got {shown}."
    )


def test_a_zero_weight_switches_one_list_off(tmp_path: Path) -> None:
    (tmp_path / "retrieval.toml").write_text("hybrid_weights = [0.0, 1]\n", encoding="utf-8")
    assert load_settings(tmp_path, environ=NO_ENV).hybrid_weights == (0.0, 1.0)


# --- names ------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["../up", "a/b", "two words", ".hidden", "x..y", "trailing.", "-flag", "é"])
def test_unsafe_profile_names_are_refused(tmp_path: Path, name: str) -> None:
    path = tmp_path / "retrieval.toml"
    message = _refused(tmp_path, f'k = 5\n[profiles."{name}"]\nembedding_model = "m"\n')
    assert message == (
        f"{path}, line 2: profile name {name!r} is not a plain name: use letters, digits, '_', '-' and single "
        "dots inside (no '/', '..', space), at most 64 characters, starting with a letter or digit."
    )


def test_a_long_profile_name_is_refused_and_a_plain_one_kept(tmp_path: Path) -> None:
    assert "not a plain name" in _refused(tmp_path, f"[profiles.{'a' * 65}]\n")
    text = "profile = 'my_Profile-2.5'\n[profiles.\"my_Profile-2.5\"]\n"
    (tmp_path / "retrieval.toml").write_text(text, encoding="utf-8")
    assert load_settings(tmp_path, environ=NO_ENV).profile.name == "my_Profile-2.5"


@pytest.mark.parametrize("name", ["recording", "corpus-embeddings", "Question-Embeddings", "postgres.rankings"])
def test_shared_cassette_names_are_refused_as_method_names(tmp_path: Path, name: str) -> None:
    path = tmp_path / "retrieval.toml"
    assert _refused(tmp_path, f'methods = ["bm25", "{name}"]\n') == (
        f"{path}, line 1: methods: method name {name!r} "
        "would share a cassette file with every method (corpus-embeddings, question-embeddings, recording) "
        "or with a method's recorded rankings (NAME.rankings): give the method another name. "
        "A method of yours may be given as module.path:factory."
    )


@pytest.mark.parametrize("name", ["../bm25", "a b", "a..b"])
def test_unsafe_method_names_are_refused(tmp_path: Path, name: str) -> None:
    assert f"methods: method name {name!r} is not a plain name" in _refused(tmp_path, f'methods = ["{name}"]\n')


def test_a_flag_names_the_flag(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as caught:
        load_settings(tmp_path, {"methods": "bm25,recording"}, environ=NO_ENV)
    assert str(caught.value).startswith("--methods: method name 'recording' would share a cassette file")


def test_the_reserved_names_are_the_shared_cassettes() -> None:
    assert {LEGACY_STAGE, QUESTION_STAGE, Path(META_FILE).stem} == RESERVED_CASSETTES
    assert RANKINGS + ".json" == SUFFIX


class _Named:
    """A user method whose object names itself after a shared cassette."""

    requires: tuple[str, ...] = ()
    needs_vectors = False

    def __init__(self, name: str) -> None:
        self.name = name

    def rank(self, context: object) -> list:  # pragma: no cover - never run
        return []


@pytest.mark.parametrize("name", ["recording", "two words"])
def test_a_user_method_object_with_an_unsafe_name_is_refused(name: str) -> None:
    with pytest.raises(ConfigError) as caught:
        plan(["bm25"], Settings(methods=("bm25",)), replay=True, extra=[_Named(name)])
    assert str(caught.value).startswith(f"method {name!r}: method name {name!r} ")


def test_a_method_channel_may_not_be_a_shared_cassette() -> None:
    method = _Named("mine")
    method.channel = "Corpus-Embeddings"  # type: ignore[attr-defined]
    with pytest.raises(ConfigError) as caught:
        plan(["bm25"], Settings(methods=("bm25",)), replay=True, extra=[method])
    assert str(caught.value) == (
        "method 'mine': channel name 'Corpus-Embeddings' "
        "would share a cassette file with every method (corpus-embeddings, question-embeddings, recording) "
        "or with a method's recorded rankings (NAME.rankings): give the channel another name."
    )
    method.channel = "rerank-gpt-4.1-mini"  # type: ignore[attr-defined]
    assert plan(["bm25"], Settings(methods=("bm25",)), replay=True, extra=[method]).declarations["mine"].channel == (
        "rerank-gpt-4.1-mini"
    )


# --- the baseline's tolerance -----------------------------------------------------------------


@pytest.mark.parametrize("tolerance", ["-0.01", "-1", "0.06", "true", "nan"])
def test_a_negative_or_odd_tolerance_is_refused_at_load(tmp_path: Path, tolerance: str) -> None:
    # The tolerance lives in the project file, where review sees it (a baseline's own is ignored).
    shown = {"true": "True", "nan": "nan"}.get(tolerance, tolerance)
    path = tmp_path / "retrieval.toml"
    assert _refused(tmp_path, f"# gate\ntolerance = {tolerance}\n") == (
        f"{path}, line 2: tolerance must be a number from 0 to 0.05, got {shown}."
    )


def test_required_is_true_or_false(tmp_path: Path) -> None:
    # `required = "yes"` would be truthy: the gate's one switch that fails a run is a bool or refused.
    path = tmp_path / "retrieval.toml"
    assert _refused(tmp_path, 'k = 5\nrequired = "yes"\n') == (
        f"{path}, line 2: required must be true or false, got 'yes'."
    )
    assert _refused(tmp_path, "required = 1\n") == f"{path}, line 1: required must be true or false, got 1."
    path.write_text("required = true\n", encoding="utf-8")
    assert load_settings(tmp_path, environ=NO_ENV).required is True
    assert Settings().required is False
