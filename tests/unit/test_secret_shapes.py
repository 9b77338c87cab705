"""Every credential shape of the one table (retrieval.text.secret_shapes) is found by the cassette
scan in a body and in a URL, and cut from a message, keeping only its prefix; one near-miss per
shape (a page token, a sort key, a commit sha, a publishable key...) is left alone by both.

Every credential here is a FIXTURE made of repeated filler at run time, valid nowhere: no file
of the repository holds a key-shaped string that a push protection would refuse.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

import pytest

from retrieval.text.redaction import find_secrets, redacted
from retrieval.text.secret_shapes import SHAPES


def _filler(n: int, alphabet: str = "Fixture0Aa9") -> str:
    return (alphabet * (n // len(alphabet) + 1))[:n]


@dataclass(frozen=True)
class Case:
    credential: str
    shown: str  # what a message keeps of it
    near_miss: str
    contexts: tuple[str, ...] = ("body", "url", "message")
    found_as: str = ""  # the scan's line, when not the shape's own


PEM_BODY = "\n".join(_filler(64, "MIIEvQIBADANBgkqhkiG9w0BAQEFAASC") for _ in range(4))
CASES: dict[str, Case] = {
    "a private key (-----BEGIN … PRIVATE KEY-----)": Case(
        f"-----BEGIN RSA PRIVATE KEY-----\n{PEM_BODY}\n-----END RSA PRIVATE KEY-----",
        "-----BEGIN RSA PRIVATE KEY-----…",
        "-----BEGIN PUBLIC KEY-----\nMIIBIjANBgkqhkiG9w0BAQEFAAOCAQ8AMIIBCgKCAQEA\n-----END PUBLIC KEY-----",
        contexts=("body", "message"),
    ),
    "a GitHub token (ghp_…)": Case("ghp_" + _filler(36), "ghp_…", "commit 9fceb02d0ae598e95dc970b74767f19372d61af8"),
    "a GitHub fine-grained token (github_pat_…)": Case(
        "github_pat_" + _filler(22) + "_" + _filler(59), "github_pat_…", "tokens start with github_pat_ and expire"
    ),
    "a GitLab token (glpat-…)": Case("glpat-" + _filler(20), "glpat-…", "glpat-example"),
    "an AWS access key id (AKIA…)": Case("AKIA" + _filler(16, "FIXTURE0123"), "AKIA…", "AKIAFIXTURE, a prefix"),
    "an AWS secret access key": Case(
        "aws_secret_access_key = " + _filler(40, "Fixture0/+9"),
        "aws_secret_access_key = …",
        "commit 9fceb02d0ae598e95dc970b74767f19372d61af8",  # 40 characters, as a secret, but no name
        contexts=("body", "message"),
    ),
    "a Slack token (xox…)": Case("xoxb-" + "1234567890-" + _filler(24), "xoxb-…", "xoxo-gossip-girl-fan-club"),
    "a Slack webhook (hooks.slack.com/…)": Case(
        "https://hooks.slack.com/services/T0FIXTURE/B0FIXTURE/" + _filler(24),
        "https://hooks.slack.com/…",
        "see https://hooks.slack.com/apps for the app",
        contexts=("body", "message"),
    ),
    "a Stripe secret key (sk_live_…)": Case("sk_live_" + _filler(24), "sk_live_…", "pk_live_" + _filler(24)),
    "a Stripe webhook secret (whsec_…)": Case("whsec_" + _filler(32), "whsec_…", "whsec_short"),
    "a JSON Web Token (eyJ…)": Case(
        "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJmaXh0dXJlIn0." + _filler(43, "Fixture0_-9"),
        "eyJ…",
        "pageToken eyJwYWdlIjogMn0",  # a page token: base64 JSON, no signature
    ),
    "a Hugging Face token (hf_…)": Case("hf_" + _filler(34), "hf_…", "from huggingface_hub import hf_hub_download"),
    "a Hugging Face organization token (api_org_…)": Case("api_org_" + _filler(34), "api_org_…", "api_org_name"),
    "an Anthropic key (sk-ant-…)": Case("sk-ant-api03-" + _filler(93), "sk-ant-…", "sk-ant-placeholder"),
    "an OpenAI-style key (sk-…)": Case("sk-proj-" + _filler(48), "sk-proj-…", "sk-learn-compatible-estimators"),
    "a Google API key (AIza…)": Case("AIza" + _filler(35), "AIza…", "keys start with AIzaSy"),
    "a Google OAuth client secret (GOCSPX-…)": Case("GOCSPX-" + _filler(28), "GOCSPX-…", "GOCSPX-short"),
    "a Google OAuth access token (ya29.…)": Case("ya29." + _filler(60), "ya29.…", "ya29.short"),
    "an Azure account key (AccountKey=…)": Case(
        "DefaultEndpointsProtocol=https;AccountName=fixture;AccountKey=" + _filler(86, "Fixture0/+9") + "==",
        "DefaultEndpointsProtocol=https;AccountName=fixture;AccountKey=…",
        "DefaultEndpointsProtocol=https;AccountName=devstoreaccount1;EndpointSuffix=core.windows.net",
        contexts=("body", "message"),
    ),
    "an Azure SAS signature (sig=…)": Case(
        "https://fixture.blob.core.windows.net/c/b?sv=2022-11-02&sig=" + _filler(40, "Fixture0%2B"),
        "https://fixture.blob.core.windows.net/c/b?sv=2022-11-02&sig=…",
        "https://fixture.blob.core.windows.net/c/b?sv=2022-11-02&sig=short",
        contexts=("body",),  # a message cuts every query string whole (test below)
    ),
    "an Azure client secret (…Q~…)": Case("Fix8Q~" + _filler(34, "Fixture0_~.-"), "…", "created_at~desc, abc1Q~short"),
    "a Bearer token": Case("Bearer " + _filler(40, "Fixture0.-_"), "Bearer …", "Bearer tokens are sent as headers"),
    "a Basic authorization": Case("Basic Zml4dHVyZTpwYXNzd29yZA==", "Basic …", "Basic usage"),
    'a "{name}" header': Case(
        '"authorization": ',
        '"authorization": ',  # a message's header value is cut by its name (test_redaction.py)
        '"author": "Dupont"',
        contexts=("body",),
        found_as='a "authorization" header',
    ),
    "a key in a query string": Case(
        "https://api.test/v1/search?q=vpn&key=" + _filler(24),
        "https://api.test/v1/search?…",
        "https://api.test/v1/search?q=vpn&sort_key=created_at_desc",  # a sort key
        contexts=("body",),
    ),
    "a password in a URL": Case(
        "https://reader:" + _filler(16) + "@db.test/x",
        "https://reader:…@db.test/x",
        "ssh://git@github.com/org/repo.git",
    ),
    "a password or secret in the text": Case(
        "passwd: " + _filler(12), "passwd: …", "the password policy: 12 characters", contexts=("body", "message")
    ),
}


def test_every_shape_of_the_table_has_its_case() -> None:
    assert sorted(CASES) == sorted(shape.what for shape in SHAPES)


def _secret_part(case: Case) -> str | None:
    """What must not survive: 6 characters of the credential past the prefix a message keeps."""
    kept = case.shown.split("…")[0]
    rest = case.credential[len(kept) :] if case.credential.startswith(kept) else case.credential
    return rest[:6] or None


def _in_context(context: str, text: str) -> str:
    if context == "body":  # JSON in JSON, as a cassette holds a request's body
        return json.dumps({"request": {"body": json.dumps({"text": f"note {text} end"})}}, indent=2)
    if context == "body line":  # at the start of a line of a body: after an escaped \\n
        return json.dumps({"request": {"body": json.dumps({"text": f"first line\n{text}\nlast"})}}, indent=2)
    return json.dumps({"request": {"uri": f"https://api.test/v1/items/{text}?page=2"}}, indent=2)


SCANNED = [
    (what, context)
    for what, case in sorted(CASES.items())
    for context in ("body", "body line", "url")
    if context.split()[0] in case.contexts
]


@pytest.mark.parametrize(("what", "context"), SCANNED)
def test_the_scan_finds_each_shape_in_a_body_and_a_url(what: str, context: str) -> None:
    case = CASES[what]
    found = find_secrets(_in_context(context, case.credential))
    assert found == [f"{case.found_as or what} at line 3"]
    secret = _secret_part(case)
    assert secret is None or all(secret not in f for f in found)


@pytest.mark.parametrize("what", sorted(what for what, case in CASES.items() if "message" in case.contexts))
def test_a_message_keeps_only_each_shapes_prefix(what: str) -> None:
    case = CASES[what]
    assert redacted(f"error: {case.credential} refused", {}) == f"error: {case.shown} refused"
    assert redacted(f"error:\n{case.credential}\nrefused", {}) == f"error:\n{case.shown}\nrefused"


@pytest.mark.parametrize("what", sorted(CASES))
def test_each_shapes_near_miss_is_left_alone(what: str) -> None:
    near = CASES[what].near_miss
    assert find_secrets(json.dumps({"request": {"body": json.dumps({"text": near})}})) == []
    if "?" not in near:  # a message cuts every query string, credential or not
        assert redacted(near, {}) == near


def test_a_sas_signature_in_a_message_goes_with_its_query_string() -> None:
    case = CASES["an Azure SAS signature (sig=…)"]
    assert redacted(f"GET {case.credential} failed", {}) == "GET https://fixture.blob.core.windows.net/c/b?… failed"


@pytest.mark.parametrize("text", ["password=x", "PASSWORD = hunter2", "secret=s3cr3t", "passwd:letmein"])
def test_free_text_forms_are_cut_from_messages_whatever_their_value(text: str) -> None:
    out = redacted(text, {})
    name = re.split(r"\s*[=:]", text)[0]
    assert out.startswith(name) and out.endswith("…") and text.split("=")[-1].split(":")[-1].strip() not in out


@pytest.mark.parametrize("what", sorted(CASES))
def test_each_shapes_credential_holds_one_of_its_hints(what: str) -> None:
    # A shape is searched only around its hints: one its credential lacks would never be found.
    [shape] = [s for s in SHAPES if s.what == what]
    credential = CASES[what].credential
    assert any(hint in (credential if shape.exact else credential.lower()) for hint in shape.hints)


def _naive(text: str, hint: str) -> list[int]:
    found, at = [], text.find(hint)
    while at != -1:
        found.append(at)
        at = text.find(hint, at + 1)
    return found


def test_the_hints_are_found_where_a_plain_search_finds_them() -> None:
    # The hints of a group are found together, through one character each: every occurrence of
    # each, overlapping ones (sk- inside sk-ant-, -----BEGIN's dashes) and at both ends included.
    from retrieval.text.redaction import _NAME_HINTS
    from retrieval.text.secret_shapes import _EXACT_HINTS, _WORD_HINTS, Hints

    pieces = [*_EXACT_HINTS, *_WORD_HINTS, *_NAME_HINTS, "--", "sk-ant-sk-", "AKIAKIA", "keykey", "%%"]
    text = "".join(f"{piece}{'x-_.=~Q'[i % 7]}{piece.upper()}" for i, piece in enumerate(pieces)) + "eyJ"
    hints = Hints(text, _NAME_HINTS)
    for hint in _EXACT_HINTS:
        assert hints.positions(hint, exact=True) == _naive(text, hint), hint
    for hint in (*_WORD_HINTS, *_NAME_HINTS):
        assert hints.positions(hint) == _naive(text.lower(), hint), hint
    with pytest.raises(KeyError):
        hints.positions("not-a-hint")
