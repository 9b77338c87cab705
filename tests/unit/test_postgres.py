"""The PostgreSQL full-text retriever (retrieval.adapters.postgres), live on a throwaway cluster.

The live tests share one cluster per module (pg_cluster_fixture: initdb, start and stop take
about 0.8 s on an idle machine, 2 to 3 s under load; conftest.py starts it while the tests
before these run); they are `slow` (`pytest -m slow`), the others run by default. Where
PostgreSQL cannot start here (not installed, no unprivileged user to run it as root, psycopg
missing), only they are skipped, with the reason; a cluster that fails to start although it could is a failure.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import re
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pytest
from demo_fixture import DEMO_DATA, demo_dataset

from retrieval.adapters import pg_cluster
from retrieval.adapters.pg_cluster import Cluster, ClusterError, unavailable_reason
from retrieval.adapters.postgres import DSN_ENV, PostgresMethod, connect, factory, question_tsquery, search_text
from retrieval.config import ConfigError, Settings
from retrieval.data.dataset import Dataset, Document, Question
from retrieval.measures.metrics import score_method
from retrieval.methods.base import Context
from retrieval.run.ranking import Ranking, rank_of


@pytest.fixture(scope="module")
def pg_cluster_fixture(start_pg_cluster: Callable[[], Cluster]) -> Iterator[Cluster]:
    """A throwaway PostgreSQL cluster on a Unix socket, for the whole module; removed afterwards."""
    try:
        import psycopg  # noqa: F401
    except ImportError:
        pytest.skip("psycopg is not installed: pip install -e '.[postgres]'")
    reason = unavailable_reason()
    if reason:
        pytest.skip(f"PostgreSQL cannot start here: {reason}")
    try:
        cluster = start_pg_cluster()
    except ClusterError as exc:
        # PostgreSQL and a user to run it are there: a failure is a bug, not a reason to skip.
        pytest.fail(f"the throwaway cluster did not start: {exc}")
    try:
        yield cluster
    finally:
        cluster.stop()
    # Stopping removes everything, socket included.
    assert not cluster.folder.exists()


@pytest.fixture
def live_dsn(pg_cluster_fixture: Cluster, monkeypatch: pytest.MonkeyPatch) -> str:
    """RETRIEVAL_PG_DSN pointing at the module's cluster for one test."""
    monkeypatch.setenv(DSN_ENV, pg_cluster_fixture.dsn)
    return pg_cluster_fixture.dsn


def ranked_ids(dataset: Dataset, rankings: list[Ranking]) -> dict[str, list[str]]:
    return {q.id: [dataset.doc_ids[i] for i in r.indices] for q, r in zip(dataset.questions, rankings, strict=True)}


# --- the demo, live -------------------------------------------------------------------------


@pytest.mark.slow
def test_demo_figures_live(live_dsn: str) -> None:
    """The 25 demo questions: exact recall@5 and MRR, overall and per type, and where each
    question's first relevant document lands (measured on PostgreSQL 15, french configuration)."""
    dataset = demo_dataset()
    rankings = PostgresMethod().rank(Context(dataset=dataset, depth=1000))
    ranked = ranked_ids(dataset, rankings)

    scores = score_method(
        ranked,
        {q.id: q.relevant for q in dataset.questions},
        {q.id: q.type for q in dataset.questions},
        ["recall@5", "mrr"],
    )
    assert scores.overall == {"recall@5": 0.6, "mrr": 0.58}
    assert scores.by_type == {
        "identifiant": {"recall@5": 1.0, "mrr": 1.0},
        "paraphrase": {"recall@5": 0.0, "mrr": 0.0},
        "mixte": {"recall@5": 1.0, "mrr": 0.9},
    }
    first_relevant = {
        q.id: min((ranked[q.id].index(d) + 1 for d in q.relevant if d in ranked[q.id]), default=None)
        for q in dataset.questions
    }
    assert first_relevant == {
        **{f"q{n:02d}": 1 for n in range(1, 11)},
        "q11": None,
        "q12": 22,
        "q13": None,
        "q14": None,
        "q15": None,
        "q16": 19,
        "q17": 45,
        "q18": 30,
        "q19": None,
        "q20": 22,
        "q21": 1,
        "q22": 1,
        "q23": 1,
        "q24": 1,
        "q25": 2,
    }
    # Only matching documents are returned: "États-Unis" matches two documents, none about hosting.
    assert ranked["q19"] == ["faq-agent-helios", "HEL-4190"]
    # Best first; equal scores in corpus order, which is id order (the ORDER BY score DESC, idx).
    for ranking in rankings:
        order = np.lexsort((ranking.indices, -ranking.scores))
        np.testing.assert_array_equal(order, np.arange(len(ranking)))


@pytest.mark.slow
def test_recorded_live_then_replayed_without_postgres(
    live_dsn: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The engine is reached through libpq, not HTTP: its rankings are recorded per question and
    replayed with no server and no DSN, giving the same figures."""
    from retrieval.evaluation.evaluate import evaluate
    from retrieval.measures.metrics import score_run

    dataset = demo_dataset()
    settings = Settings(dataset=str(DEMO_DATA), methods=(), cassettes=str(tmp_path / "cassettes"))
    spec = "retrieval.adapters.postgres:factory"
    live = evaluate(dataset, settings, mode="record", methods=[spec])
    assert (tmp_path / "cassettes" / "local" / "postgres.rankings.json").is_file()
    monkeypatch.delenv(DSN_ENV)
    replayed = evaluate(dataset, settings, methods=[spec])
    assert replayed.ranked_ids("postgres") == live.ranked_ids("postgres")
    figures = score_run(replayed)["postgres"].overall
    assert figures == {"recall@5": 0.6, "mrr": 0.58}


@pytest.mark.slow
def test_depth_truncates_the_same_order(live_dsn: str) -> None:
    dataset = demo_dataset()
    full = PostgresMethod().rank(Context(dataset=dataset, depth=1000))
    short = PostgresMethod().rank(Context(dataset=dataset, depth=3))
    assert [len(r) for r in short] == [min(3, len(r)) for r in full] and len(short) == 25
    for deep, shallow in zip(full, short, strict=True):
        np.testing.assert_array_equal(shallow.indices, deep.indices[:3])


# --- ranking rules on small corpora ---------------------------------------------------------

TINY = Dataset(
    "tiny",
    (
        Document("in-text", "Procédure de sauvegarde", "Le jeton expire après 90 jours."),
        Document("in-title", "Jeton expiré", "La procédure de sauvegarde dure 90 jours."),
        Document("quota", "Quota", "Stockage plein."),
    ),
    (
        Question("a", "jeton", "t", ("in-title",)),
        Question("b", "sauvegarde", "t", ("in-text",)),
        Question("c", "de la", "t", ("quota",)),
        Question("d", "quota stockage", "t", ("quota",)),
        Question("e", "", "t", ("quota",)),
    ),
    "tiny",
)


@pytest.mark.slow
def test_title_weighs_above_text(live_dsn: str) -> None:
    """ts_rank_cd with weights {0.1, 0.2, 0.4, 1.0}: one title word scores 1.0, one text word 0.4;
    a stop-word-only or empty question matches nothing (and does not fail)."""
    rankings = PostgresMethod().rank(Context(dataset=TINY, depth=10))
    assert [(r.indices.tolist(), r.scores.tolist()) for r in rankings] == [
        ([1, 0], [1.0, 0.4]),  # "jeton": in-title's title, in-text's text
        ([0, 1], [1.0, 0.4]),
        ([], []),
        ([2], [1.4]),  # title "Quota" + text "Stockage"
        ([], []),
    ]
    assert PostgresMethod(weights=(0.1, 0.2, 1.0, 1.0)).rank(Context(dataset=TINY, depth=10))[0].scores.tolist() == [
        1.0,
        1.0,
    ]


@pytest.mark.slow
def test_a_changed_corpus_is_reindexed(live_dsn: str) -> None:
    """Each run indexes its own corpus in a temporary table: no index survives from a previous run."""
    method = PostgresMethod()
    assert method.rank(Context(dataset=TINY, depth=10))[3].indices.tolist() == [2]
    swapped = dataclasses.replace(TINY, documents=(TINY.documents[2], TINY.documents[0], TINY.documents[1]))
    assert method.rank(Context(dataset=swapped, depth=10))[3].indices.tolist() == [0]
    with connect() as conn:  # another session: nothing was left in the database
        assert conn.execute("SELECT to_regclass('retrieval_documents')").fetchone() == (None,)


@pytest.mark.slow
def test_an_engine_error_is_one_config_error(live_dsn: str) -> None:
    with pytest.raises(ConfigError) as caught:
        PostgresMethod(name="pg", text_search_config="klingon").rank(Context(dataset=TINY, depth=10))
    assert str(caught.value) == (
        "method 'pg': PostgreSQL failed while indexing the corpus (text search configuration \"klingon\" does not"
        " exist); check text_search_config 'klingon' and that the RETRIEVAL_PG_DSN user may create temporary tables."
    )


@pytest.mark.slow
def test_loosely_written_identifiers_find_their_page(live_dsn: str) -> None:
    """ "hel 4120", "HEL4040", "erreur 4040": without splitting identifiers, the documents'
    "HEL-4120" gives the lexeme "-4120" and none of these would find its page."""
    demo = demo_dataset()
    questions = ("hel 4120", "HEL4040", "erreur 4040", "HEL-4040", "HEL 4040 import")
    dataset = dataclasses.replace(
        demo, questions=tuple(Question(f"x{i}", q, "t", ("x",)) for i, q in enumerate(questions))
    )
    rankings = PostgresMethod().rank(Context(dataset=dataset, depth=3))
    assert [dataset.doc_ids[r.indices[0]] for r in rankings] == [
        "HEL-4120",
        "HEL-4040",
        "HEL-4040",
        "HEL-4040",
        "HEL-4040",
    ]
    assert rank_of(rankings[2], demo.doc_ids.index("HEL-4040")) == 1 and len(rankings[2]) == 1


# --- query building -------------------------------------------------------------------------


def test_search_text_splits_identifiers() -> None:
    assert search_text("Erreur HEL-4040, hel 4120, HEL4040") == "Erreur HEL 4040, hel 4120, HEL 4040"
    assert search_text("inc-2026-04-doublons") == "inc 2026 04-doublons"
    # Not identifiers: numbers, hours, hyphenated words, a leading minus.
    assert search_text("400 000 lignes depuis 10h, peut-être -5") == "400 000 lignes depuis 10h, peut-être -5"
    assert search_text("accès à l'état") == "accès à l'état"


@pytest.mark.slow
def test_question_tsquery(live_dsn: str) -> None:
    """The OR of the question's lexemes: french stemming and stop words, accents kept, identifiers split."""
    with connect() as conn:
        built = {
            q: question_tsquery(conn, q)
            for q in (
                "Erreur HEL-4040",
                "hel 4120",
                "HEL4040",
                "accés à l'état",
                "États-Unis",
                "de la que",
                "le la les de",
                "",
                "   ",
                "l'API \"C:\\temp\" O'Neil | & ! <-> :*",
                "http://x.fr/a'b",
            )
        }
    assert built == {
        "Erreur HEL-4040": "'4040' | 'erreur' | 'hel'",
        "hel 4120": "'4120' | 'hel'",
        "HEL4040": "'4040' | 'hel'",
        # No unaccent in the french configuration: the typo "accés" stays apart from "accès".
        "accés à l'état": "'accé' | 'état'",
        "États-Unis": "'unis' | 'état' | 'états-un'",
        "de la que": None,
        # "les" is not in PostgreSQL's french stop list, and stems to "le".
        "le la les de": "'le'",
        "": None,
        "   ": None,
        # tsquery operators in a question are plain text.
        "l'API \"C:\\temp\" O'Neil | & ! <-> :*": "'api' | 'neil' | 'o' | 'temp'",
        # A lexeme holding a quote is quoted for tsquery input.
        "http://x.fr/a'b": "'/a''b' | 'x.fr' | 'x.fr/a''b'",
    }


# --- connection errors (no server needed) ---------------------------------------------------


def test_unset_dsn_is_one_config_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(DSN_ENV, raising=False)
    with pytest.raises(ConfigError) as caught:
        PostgresMethod().rank(Context(dataset=TINY, depth=10))
    assert str(caught.value) == (
        "RETRIEVAL_PG_DSN is not set: set it to a PostgreSQL connection string or URL,"
        " e.g. RETRIEVAL_PG_DSN='host=localhost dbname=postgres user=postgres'."
    )


def test_unreachable_server_is_one_config_error_without_the_password(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    pytest.importorskip("psycopg")
    monkeypatch.setenv(DSN_ENV, f"postgresql://alice:s3cret-pw@/db?host={tmp_path}")
    with pytest.raises(ConfigError) as caught:
        connect()
    assert str(caught.value) == (
        f"RETRIEVAL_PG_DSN: cannot connect to PostgreSQL (connection is bad: connection to server on socket"
        f' "{tmp_path}/.s.PGSQL.5432" failed: No such file or directory); start the server or fix the variable.'
    )


def test_a_driver_message_quoting_the_password_is_masked(monkeypatch: pytest.MonkeyPatch) -> None:
    """Should libpq ever echo the password in an error, the one line shows *** instead."""
    psycopg = pytest.importorskip("psycopg")

    def refuse(conninfo: str) -> None:
        raise psycopg.OperationalError(f"server said: bad options ({conninfo})\nDETAIL: more")

    monkeypatch.setattr(psycopg, "connect", refuse)
    monkeypatch.setenv(DSN_ENV, "host=/nowhere user=alice password=s3cret-pw")
    with pytest.raises(ConfigError) as caught:
        connect()
    assert str(caught.value) == (
        "RETRIEVAL_PG_DSN: cannot connect to PostgreSQL (server said: bad options"
        " (user=alice password=*** host=/nowhere connect_timeout=10)); start the server or fix the variable."
    )


def test_malformed_dsn_is_not_echoed(monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("psycopg")
    monkeypatch.setenv(DSN_ENV, "password=s3cret-pw host")
    with pytest.raises(ConfigError) as caught:
        connect()
    assert str(caught.value) == (
        "RETRIEVAL_PG_DSN is neither a libpq connection string nor a postgresql:// URL: fix its syntax."
    )


def test_missing_driver_says_which_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(DSN_ENV, "host=/nowhere")
    monkeypatch.setitem(sys.modules, "psycopg", None)  # import psycopg now raises ImportError
    with pytest.raises(ConfigError) as caught:
        PostgresMethod().rank(Context(dataset=TINY, depth=10))
    assert str(caught.value) == "the postgres method needs psycopg: pip install 'retrieval-regression[postgres]'."


def test_factory_declares_the_contract(monkeypatch: pytest.MonkeyPatch) -> None:
    # Building the method needs neither the driver nor the variable (a replayed run has neither).
    monkeypatch.delenv(DSN_ENV, raising=False)
    monkeypatch.setitem(sys.modules, "psycopg", None)
    method = factory(Settings())
    assert (method.name, method.channel, method.requires, method.needs_vectors, method.calls) == (
        "postgres",
        "postgres",
        (),
        False,
        "rankings",
    )
    assert method.config == {
        "engine": "postgresql",
        "text_search_config": "french",
        "weights": [0.1, 0.2, 0.4, 1.0],
        "query": "or-of-question-lexemes",
    }
    assert PostgresMethod(name="pg-prod").channel == "pg-prod"


# --- the throwaway cluster ------------------------------------------------------------------


def test_cluster_unavailable_reasons(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(pg_cluster, "find_binaries", lambda: None)
    assert unavailable_reason() == (
        "PostgreSQL is not installed (no initdb/pg_ctl on PATH nor under /usr/lib/postgresql/*/bin)"
    )
    with pytest.raises(ClusterError, match=r"^PostgreSQL is not installed"):
        pg_cluster.start_cluster()
    monkeypatch.undo()
    monkeypatch.setattr(pg_cluster, "find_binaries", lambda: Path("/usr/bin"))
    monkeypatch.setattr(pg_cluster.os, "geteuid", lambda: 0)
    monkeypatch.setattr(pg_cluster, "SERVER_USER", "no-such-user-for-pg")
    assert unavailable_reason() == (
        "running as root and there is no unprivileged user 'no-such-user-for-pg' to run PostgreSQL as"
    )


@pytest.mark.slow
@pytest.mark.skipif(os.geteuid() != 0 or unavailable_reason() is not None, reason="needs root and PostgreSQL")
def test_failed_start_says_why_and_leaves_nothing(tmp_path: Path) -> None:
    """As root, a folder `nobody` cannot enter: initdb fails, one line says so, the folder is removed."""
    parent = tmp_path / "private"
    parent.mkdir(mode=0o700)
    with pytest.raises(ClusterError) as caught:
        pg_cluster.start_cluster(parent)
    assert re.fullmatch(
        rf'initdb failed \(exit 1\): initdb: error: could not access directory "{parent}/pg-\w+/data"'
        ": Permission denied",
        str(caught.value),
    )
    assert list(parent.iterdir()) == []


@pytest.mark.slow
def test_command_runs_with_the_cluster_dsn(
    pg_cluster_fixture: Cluster, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`python -m retrieval.adapters.pg_cluster -- CMD`: CMD sees RETRIEVAL_PG_DSN; its exit code is returned."""
    monkeypatch.setattr(pg_cluster, "throwaway_cluster", lambda: contextlib.nullcontext(pg_cluster_fixture))
    check = f"import os, sys; sys.exit(7 if os.environ['RETRIEVAL_PG_DSN'] == {pg_cluster_fixture.dsn!r} else 3)"
    assert pg_cluster.main(["--", sys.executable, "-c", check]) == 7
    assert capsys.readouterr().err == f"pg_cluster: RETRIEVAL_PG_DSN={pg_cluster_fixture.dsn}\n"
    assert pg_cluster.main([]) == 2
    assert capsys.readouterr().err == "usage: python -m retrieval.adapters.pg_cluster -- COMMAND [ARGS...]\n"


def test_cluster_dsn_survives_an_awkward_folder() -> None:
    """The DSN quotes the socket folder when libpq needs it (a space, a quote, a backslash)."""
    conninfo = pytest.importorskip("psycopg.conninfo")
    folder = Path("/tmp/with space/it's a\\b")
    dsn = Cluster(folder, Path("/usr/bin"), None).dsn
    assert dsn == "host='/tmp/with space/it\\'s a\\\\b' dbname=postgres user=postgres"
    assert conninfo.conninfo_to_dict(dsn) == {"host": str(folder), "dbname": "postgres", "user": "postgres"}
    assert Cluster(Path("/tmp/pg-x"), Path("/usr/bin"), None).dsn == "host=/tmp/pg-x dbname=postgres user=postgres"
