"""What reaches a terminal or a CI log holds no credential: `redacted` and `failure_text`."""

from __future__ import annotations

import pytest

from retrieval.evaluation.method_run import raising_method
from retrieval.text.redaction import declare_key_variables, failure_text, redacted

ENVIRON = {
    "SEARCH_API_KEY": "fixture-key-0123456789",
    "SEARCH_KEY_PREFIX": "fixture-key",  # a credential's beginning: the longer value wins
    "PGPASSWORD": "fixture-pw-99",
    "SHORT_TOKEN": "abc",  # too short to replace without mangling ordinary words
    "HOME": "/root/fixture-key-0123456789",  # not named like a credential
}


def test_query_strings_and_credential_variables_are_cut() -> None:
    text = "GET https://s.example/q?api_key=x&q=1 failed; key fixture-key-0123456789, pw fixture-pw-99; abc"
    assert redacted(text, ENVIRON) == ("GET https://s.example/q?… failed; key $SEARCH_API_KEY, pw $PGPASSWORD; abc")


def test_text_without_credentials_is_unchanged() -> None:
    text = "method 'bm25' returned 3 rankings for 4 questions: rank(context) must return one per question."
    assert redacted(text, ENVIRON) == text


def test_failure_text_names_the_method_and_redacts_the_traceback() -> None:
    try:
        raise RuntimeError("401 for url: https://s.example/q?token=fixture-key-0123456789")
    except RuntimeError as exc:
        exc.add_note("raised by method 'search'")
        caught = exc
    text = failure_text(caught)
    assert text.splitlines()[0] == "RuntimeError: 401 for url: https://s.example/q?… (raised by method 'search')"
    assert "Traceback (most recent call last):" in text and "fixture-key" not in text
    assert raising_method(caught) == "search"
    assert raising_method(RuntimeError("no note")) is None


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('HTTP 400: {"headers": {"Authorization": "Bearer abc.def"}}', 'HTTP 400: {"headers": {"Authorization": "…"}}'),
        ("{'x-algolia-api-key': 'v1', 'accept': '*/*'}", "{'x-algolia-api-key': '…', 'accept': '*/*'}"),
        ("echo: X-Api-Key: v2-fixture\r\nCookie: sid=v3; lang=fr", "echo: X-Api-Key: …\r\nCookie: …; lang=fr"),
        ("Authorization: Basic Zml4dHVyZTpwdw==", "Authorization: Basic …"),
        ("form client_secret=v4&grant_type=x", "form client_secret=…&grant_type=x"),
        ("GET https://reader:v5@s.test/q failed", "GET https://reader:…@s.test/q failed"),
        # FIXTURE keys of the two shapes (a Google key is AIza and 35 characters), valid nowhere.
        ("key AIzaSyFIXTURE" + "0" * 26 + " and sk-fixture0123456789abcdef", "key AIza… and sk-…"),
    ],
    ids=["json header", "python mapping", "echoed header lines", "basic", "form field", "url password", "shapes"],
)
def test_credentials_a_server_echoes_are_cut_from_messages(text: str, expected: str) -> None:
    assert redacted(text, {}) == expected


def test_a_declared_key_variable_is_redacted_whatever_its_name() -> None:
    environ = {"FIXTURE_DECLARED_LOGIN": "fixture-login-0123", "OTHER_SETTING": "fixture-setting-0123"}
    declare_key_variables(["FIXTURE_DECLARED_LOGIN"])
    assert redacted("as fixture-login-0123, fixture-setting-0123", environ) == (
        "as $FIXTURE_DECLARED_LOGIN, fixture-setting-0123"
    )


@pytest.mark.parametrize(
    "text",
    [
        "gemini needs an API key: set GEMINI_API_KEY (or replay the cassettes without --live).",
        "record it with `GEMINI_API_KEY=... pytest --record --retrieval-profile gemini`",
        "profile 'x': api_key_env: must name an environment variable",
        "Token counts: 12 tokens in 3 calls; Basic usage; Bearer tokens are sent as headers",
        "KeyError: 'model'",
    ],
)
def test_the_tools_own_messages_are_left_as_they_are(text: str) -> None:
    assert redacted(text, {}) == text
