"""A retriever over PostgreSQL full-text search (optional: pip install 'retrieval-regression[postgres]').

Spec: `retrieval.adapters.postgres:factory`. It connects to the server named by the
environment variable RETRIEVAL_PG_DSN (a libpq connection string or a postgresql:// URL),
read when it ranks. It declares `calls = "rankings"`: the evaluator records its rankings
and replays them without PostgreSQL; rank() itself always ranks for real.

Indexing. Each run copies the corpus into a TEMPORARY table and indexes it there:
    tsv = setweight(to_tsvector('french', title), 'A') || setweight(to_tsvector('french', text), 'B')
(a stored generated column) with a GIN index on tsv. A temporary table belongs to the
connection and disappears with it: nothing is written durably to the user's database, no
CREATE privilege on a schema is needed, two runs never share (or race on) a table, and an
index can never be stale for a changed corpus. Rebuilding is cheap (the 64 demo documents
index in about 30 ms), and in replay mode rank() does not run at all.

Ranking. ts_rank_cd(WEIGHTS, tsv, query) with WEIGHTS for the labels {D, C, B, A} =
{0.1, 0.2, 0.4, 1.0} (PostgreSQL's defaults, written out): a title word (A) counts 2.5 times
a text word (B). No length normalisation (ts_rank_cd's default, 0). Order: score descending,
then corpus position (the lower index first, as retrieval.run.ranking.top_k breaks ties). Only
matching documents are returned, at most context.depth per question.

Queries. plainto_tsquery ANDs every word of a natural-language question and matches almost
nothing (on the demo: 1 question of 25 matches a document; recall@5 0.04). The question is
analysed with to_tsvector (the documents' configuration: stemmed, stop words removed) and its
distinct lexemes are ORed into a tsquery. On the demo this gives the same recall@5 and MRR as
websearch_to_tsquery over the words joined by " or " (measured: same figures, 23 of 25 rankings
identical); it is kept because it analyses a question exactly as a document (hyphenated
compounds included) and needs no escaping of websearch operators.

Identifiers. The default parser reads "HEL-4040" as the word "hel" and the signed integer
"-4040", while "hel 4040" gives "4040" and "HEL4040" one word "hel4040": they would not
match each other. Before analysis, in the documents and the questions alike (search_text),
a hyphen glued to a following digit, or a letter directly followed by a digit, becomes a
space: "HEL-4040", "HEL4040", "hel 4040" all give the lexemes "hel" and "4040".
"""

from __future__ import annotations

import os
import re
from typing import TYPE_CHECKING, Any

import numpy as np

from retrieval.config import ConfigError
from retrieval.methods.base import Context
from retrieval.run.ranking import Ranking

if TYPE_CHECKING:
    from retrieval.config import Settings

__all__ = [
    "DSN_ENV",
    "TEXT_SEARCH_CONFIG",
    "WEIGHTS",
    "PostgresMethod",
    "connect",
    "factory",
    "question_tsquery",
    "search_text",
]

DSN_ENV = "RETRIEVAL_PG_DSN"
TEXT_SEARCH_CONFIG = "french"
# ts_rank_cd's weights for the labels {D, C, B, A}; titles are labelled A, texts B.
WEIGHTS = (0.1, 0.2, 0.4, 1.0)
# Seconds libpq waits for the server when the DSN does not say.
CONNECT_TIMEOUT = 10
# The temporary table (in the connection's own pg_temp schema).
TABLE = "retrieval_documents"

# A hyphen glued between a letter or digit and a digit ("HEL-4040", "inc-2026-04"), or a
# letter directly followed by a digit ("HEL4040").
_ID_BREAK = re.compile(r"(?<=\w)-(?=\d)|(?<=[^\W\d_])(?=\d)")


def search_text(text: str) -> str:
    """The text PostgreSQL analyses, for documents and questions alike: identifiers are split
    into their letters and their digits ("HEL-4040", "HEL4040" -> "HEL 4040")."""
    return _ID_BREAK.sub(" ", text)


# A question's tsquery: its distinct lexemes, each quoted for tsquery input (a quote doubled,
# a backslash escaped), ORed. No lexeme (an empty question, or only stop words) gives NULL,
# which matches no document (and, unlike an empty tsquery, raises no NOTICE).
_QUESTION_TSQUERY = r"""(
    SELECT string_agg('''' || replace(replace(lexeme, '\', '\\'), '''', '''''') || '''', ' | ')::tsquery
    FROM unnest(tsvector_to_array(to_tsvector(%(config)s::regconfig, q.text))) AS lexeme
)"""

# Every question in one round trip: one row per (question, matching document), best first.
_RANK_SQL = f"""
SELECT q.ord, hit.idx, hit.score
FROM unnest(%(questions)s::text[]) WITH ORDINALITY AS q(text, ord)
CROSS JOIN LATERAL (SELECT {_QUESTION_TSQUERY} AS query) AS built
CROSS JOIN LATERAL (
    SELECT d.idx, ts_rank_cd(%(weights)s::float4[], d.tsv, built.query) AS score
    FROM pg_temp.{TABLE} AS d
    WHERE d.tsv @@ built.query
    ORDER BY score DESC, d.idx
    LIMIT %(depth)s
) AS hit
ORDER BY q.ord, hit.score DESC, hit.idx
"""

_CREATE_SQL = f"""
CREATE TEMPORARY TABLE {TABLE} (
    idx integer PRIMARY KEY,
    id text NOT NULL,
    title text NOT NULL,
    body text NOT NULL,
    tsv tsvector GENERATED ALWAYS AS (
        setweight(to_tsvector(%(config)s::regconfig, title), 'A')
        || setweight(to_tsvector(%(config)s::regconfig, body), 'B')
    ) STORED
)
"""


class PostgresMethod:
    """Ranks the corpus with PostgreSQL full-text search (see the module docstring)."""

    requires: tuple[str, ...] = ()
    needs_vectors = False
    calls = "rankings"

    def __init__(
        self,
        name: str = "postgres",
        text_search_config: str = TEXT_SEARCH_CONFIG,
        weights: tuple[float, float, float, float] = WEIGHTS,
    ) -> None:
        self.name = name
        self.channel = name
        self.text_search_config = text_search_config
        self.weights = weights
        # Recorded in the baseline's configuration: a change of any of them moves the figures.
        self.config: dict[str, Any] = {
            "engine": "postgresql",
            "text_search_config": text_search_config,
            "weights": list(weights),
            "query": "or-of-question-lexemes",
        }

    def rank(self, context: Context) -> list[Ranking]:
        """Index the corpus in a temporary table, then rank every question in one round trip."""
        questions = [search_text(q.text) for q in context.dataset.questions]
        with connect() as conn:  # first: it turns a missing driver or server into one line
            import psycopg

            step = "indexing the corpus"
            try:
                self._index(conn, context)
                step = "ranking the questions"
                rows = conn.execute(
                    _RANK_SQL,
                    {
                        "questions": questions,
                        "config": self.text_search_config,
                        "weights": list(self.weights),
                        "depth": context.depth,
                    },
                ).fetchall()
            except psycopg.Error as exc:
                # An unknown text search configuration, no TEMP privilege on the database...: one line.
                raise ConfigError(
                    f"method {self.name!r}: PostgreSQL failed while {step} ({_first_line(exc)});"
                    f" check text_search_config {self.text_search_config!r} and that the {DSN_ENV} user may"
                    " create temporary tables."
                ) from None
        hits: list[list[tuple[int, float]]] = [[] for _ in questions]
        for ordinal, idx, score in rows:
            hits[ordinal - 1].append((idx, score))
        return [
            Ranking(
                np.array([idx for idx, _ in found], dtype=np.int64),
                np.array([score for _, score in found], dtype=np.float64),
            )
            for found in hits
        ]

    def _index(self, conn: Any, context: Context) -> None:
        """Create the temporary table, copy the documents in (COPY: one stream), build the GIN index."""
        conn.execute(_CREATE_SQL.replace("%(config)s", _literal(self.text_search_config)))
        with conn.cursor().copy(f"COPY {TABLE} (idx, id, title, body) FROM STDIN") as copy:
            for idx, doc in enumerate(context.dataset.documents):
                copy.write_row((idx, doc.id, search_text(doc.title), search_text(doc.text)))
        conn.execute(f"CREATE INDEX ON {TABLE} USING gin (tsv)")
        conn.execute(f"ANALYZE {TABLE}")


def _literal(value: str) -> str:
    """A SQL string literal (a generated column's expression cannot take a bind parameter)."""
    return "'" + value.replace("'", "''") + "'"


def question_tsquery(conn: Any, question: str, config: str = TEXT_SEARCH_CONFIG) -> str | None:
    """The tsquery (as text) that ranks a question, None when it has no lexeme."""
    row = conn.execute(
        f"SELECT ({_QUESTION_TSQUERY})::text FROM (SELECT %(question)s::text AS text) AS q",
        {"question": search_text(question), "config": config},
    ).fetchone()
    return row[0] if row else None


def connect() -> Any:
    """A psycopg connection to RETRIEVAL_PG_DSN; ConfigError (one line, no password) when psycopg
    is missing, the variable is unset or malformed, or the server cannot be reached."""
    dsn = os.environ.get(DSN_ENV, "").strip()
    if not dsn:
        raise ConfigError(
            f"{DSN_ENV} is not set: set it to a PostgreSQL connection string or URL,"
            f" e.g. {DSN_ENV}='host=localhost dbname=postgres user=postgres'."
        )
    try:
        import psycopg
        from psycopg.conninfo import conninfo_to_dict, make_conninfo
    except ImportError:
        raise ConfigError("the postgres method needs psycopg: pip install 'retrieval-regression[postgres]'.") from None
    try:
        params = conninfo_to_dict(dsn)
    except psycopg.Error:
        # libpq's parse errors can quote the string, password included: repeat none of it.
        raise ConfigError(
            f"{DSN_ENV} is neither a libpq connection string nor a postgresql:// URL: fix its syntax."
        ) from None
    if "connect_timeout" not in params:  # bounded wait unless the DSN chose one
        dsn = make_conninfo(dsn, connect_timeout=CONNECT_TIMEOUT)
    try:
        return psycopg.connect(dsn)
    except psycopg.Error as exc:
        reason = _redact(_first_line(exc), params.get("password"))
        raise ConfigError(
            f"{DSN_ENV}: cannot connect to PostgreSQL ({reason}); start the server or fix the variable."
        ) from None


def _first_line(exc: Exception) -> str:
    """The driver's message on one line (libpq adds DETAIL and HINT lines)."""
    lines = str(exc).strip().splitlines()
    return lines[0] if lines else type(exc).__name__


def _redact(message: str, password: object) -> str:
    """The message with the password (if any, and should the driver ever echo it) masked."""
    return message.replace(str(password), "***") if password else message


def factory(settings: Settings) -> PostgresMethod:
    """The `module:factory` entry point: --methods retrieval.adapters.postgres:factory.

    It needs neither psycopg nor a server: both are reached only when the method ranks, so
    a replayed run (which never calls rank()) works without them.
    """
    return PostgresMethod()
