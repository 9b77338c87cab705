"""A retriever over PostgreSQL full-text search (optional: pip install 'retrieval-regression[postgres]').

Spec: `retrieval.adapters.postgres:factory`. It connects to the server named by the
environment variable RETRIEVAL_PG_DSN (a libpq connection string or a postgresql:// URL),
read when it ranks.

Indexing. Each run copies the corpus into a TEMPORARY table and indexes it there:
    tsv = setweight(to_tsvector('french', title), 'A') || setweight(to_tsvector('french', text), 'B')
with a GIN index on tsv. A temporary table belongs to the connection and disappears with
it: nothing is written durably to the user's database, two runs never share (or race on)
a table, and an index can never be stale for a changed corpus. Rebuilding is cheap (the
64 demo documents index in a few milliseconds), and in replay mode rank() does not run at all.

Ranking. ts_rank_cd(WEIGHTS, tsv, query), WEIGHTS = {D, C, B, A} = {0.1, 0.2, 0.4, 1.0}:
a title word (A) counts 2.5 times a text word (B). Order: score descending, then corpus
position (the lower index first, as retrieval.ranking.top_k breaks ties). Only matching
documents are returned, at most context.depth per question.

Queries. plainto_tsquery ANDs every word of a natural-language question and matches almost
nothing. The question is analysed with to_tsvector (same configuration: stemmed, stop words
removed) and its distinct lexemes are ORed into a tsquery.

Identifiers. The default parser reads "HEL-4040" as the word "hel" and the signed integer
"-4040", while a user typing "hel 4040" gives "4040": they would not match. Before
analysis, a hyphen between a letter or digit and a digit becomes a space, in the documents
and in the questions alike (search_text), so "HEL-4040", "hel 4040" and "HEL 4040" all
give the lexemes "hel" and "4040", and "inc-2026-04" gives "inc", "2026", "04".
"""

from __future__ import annotations

import os
import re
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from retrieval.config import ConfigError
from retrieval.methods.base import Context
from retrieval.ranking import Ranking

if TYPE_CHECKING:
    from retrieval.config import Settings

__all__ = ["DSN_ENV", "WEIGHTS", "PostgresMethod", "factory", "search_text"]

DSN_ENV = "RETRIEVAL_PG_DSN"
# ts_rank_cd's weights for the labels {D, C, B, A}: PostgreSQL's defaults, written out.
# Titles are labelled A (1.0), texts B (0.4).
WEIGHTS = (0.1, 0.2, 0.4, 1.0)
TEXT_SEARCH_CONFIG = "french"
# Seconds libpq waits for the server when the DSN does not say.
CONNECT_TIMEOUT = 10
TABLE = "retrieval_documents"

QueryMode = Literal["lexemes", "websearch"]

# A hyphen glued between a letter or digit and a digit: "HEL-4040", "inc-2026-04".
_ID_HYPHEN = re.compile(r"(?<=\w)-(?=\d)")
_WORD = re.compile(r"\w+")


def search_text(text: str) -> str:
    """The text PostgreSQL analyses: identifiers' inner hyphens become spaces (see the module docstring)."""
    return _ID_HYPHEN.sub(" ", text)


def websearch_or(text: str) -> str:
    """The question's words joined by " or ", for websearch_to_tsquery (no operator survives)."""
    return " or ".join(_WORD.findall(search_text(text)))


# The question's distinct lexemes, each quoted for tsquery input ('' for a quote, \\ for a
# backslash), joined by | ; an empty string (no lexeme: empty or only stop words) gives an
# empty tsquery, which matches nothing.
_LEXEME_QUERY = """(
    SELECT coalesce(string_agg('''' || replace(replace(lexeme, '\\', '\\\\'), '''', '''''') || '''', ' | '), '')::tsquery
    FROM unnest(tsvector_to_array(to_tsvector(%(config)s::regconfig, q.text))) AS lexeme
)"""
_WEBSEARCH_QUERY = "websearch_to_tsquery(%(config)s::regconfig, q.text)"

_RANK_SQL = """
SELECT q.ord, hit.idx, hit.score
FROM unnest(%(questions)s::text[]) WITH ORDINALITY AS q(text, ord)
CROSS JOIN LATERAL (SELECT {query} AS query) AS built
CROSS JOIN LATERAL (
    SELECT d.idx, ts_rank_cd(%(weights)s::float4[], d.tsv, built.query) AS score
    FROM {table} AS d
    WHERE d.tsv @@ built.query
    ORDER BY score DESC, d.idx
    LIMIT %(depth)s
) AS hit
ORDER BY q.ord, hit.score DESC, hit.idx
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
        query_mode: QueryMode = "lexemes",
    ) -> None:
        self.name = name
        self.channel = name
        self.text_search_config = text_search_config
        self.weights = weights
        self.query_mode = query_mode
        self.config: dict[str, Any] = {
            "engine": "postgresql",
            "text_search_config": text_search_config,
            "weights": list(weights),
            "query": query_mode,
        }

    def rank(self, context: Context) -> list[Ranking]:
        """Index the corpus in a temporary table, then rank every question in one round trip."""
        with connect() as conn:
            self._index(conn, context)
            rows = self._search(conn, [search_text(q.text) if self.query_mode == "lexemes" else websearch_or(q.text)
                                       for q in context.dataset.questions], context.depth)
        hits: list[list[tuple[int, float]]] = [[] for _ in context.dataset.questions]
        for ord_, idx, score in rows:
            hits[ord_ - 1].append((idx, score))
        return [
            Ranking(np.array([i for i, _ in h], dtype=np.int64), np.array([s for _, s in h], dtype=np.float64))
            for h in hits
        ]

    def _index(self, conn: Any, context: Context) -> None:
        from psycopg import sql

        config = sql.Literal(self.text_search_config)
        table = sql.Identifier(TABLE)
        conn.execute(
            sql.SQL(
                "CREATE TEMPORARY TABLE {table} ("
                " idx integer PRIMARY KEY, id text NOT NULL, title text NOT NULL, body text NOT NULL,"
                " tsv tsvector GENERATED ALWAYS AS ("
                "  setweight(to_tsvector({config}::regconfig, title), 'A')"
                "  || setweight(to_tsvector({config}::regconfig, body), 'B')) STORED)"
            ).format(table=table, config=config)
        )
        with conn.cursor().copy(sql.SQL("COPY {table} (idx, id, title, body) FROM STDIN").format(table=table)) as copy:
            for idx, doc in enumerate(context.dataset.documents):
                copy.write_row((idx, doc.id, search_text(doc.title), search_text(doc.text)))
        conn.execute(sql.SQL("CREATE INDEX ON {table} USING gin (tsv)").format(table=table))
        conn.execute(sql.SQL("ANALYZE {table}").format(table=table))

    def _search(self, conn: Any, questions: list[str], depth: int) -> list[tuple[int, int, float]]:
        from psycopg import sql

        query = _LEXEME_QUERY if self.query_mode == "lexemes" else _WEBSEARCH_QUERY
        statement = sql.SQL(_RANK_SQL.format(query=query, table="{table}")).format(table=sql.Identifier(TABLE))
        params = {"questions": questions, "config": self.text_search_config, "weights": list(self.weights), "depth": depth}
        return conn.execute(statement, params).fetchall()


def connect() -> Any:
    """A connection to RETRIEVAL_PG_DSN; ConfigError (one line, no password) when unset or unreachable."""
    dsn = os.environ.get(DSN_ENV, "").strip()
    if not dsn:
        raise ConfigError(
            f"{DSN_ENV} is not set: set it to a PostgreSQL connection string, "
            f"e.g. {DSN_ENV}='host=localhost dbname=postgres user=postgres'."
        )
    try:
        import psycopg
        from psycopg.conninfo import conninfo_to_dict
    except ImportError:
        raise ConfigError(
            "the postgres method needs psycopg: pip install 'retrieval-regression[postgres]'."
        ) from None
    try:
        params = conninfo_to_dict(dsn)
    except psycopg.Error:
        # libpq's parse errors can quote the string, password included: say nothing of it.
        raise ConfigError(
            f"{DSN_ENV} is not a valid libpq connection string nor postgresql:// URL: fix its syntax."
        ) from None
    params.setdefault("connect_timeout", CONNECT_TIMEOUT)
    try:
        return psycopg.connect(**params)
    except psycopg.Error as exc:
        reason = _redact(str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__, params)
        raise ConfigError(
            f"{DSN_ENV}: cannot connect to PostgreSQL ({reason}); check the server is running and the variable."
        ) from None


def _redact(message: str, params: dict[str, Any]) -> str:
    password = str(params.get("password") or "")
    return message.replace(password, "***") if password else message


def factory(settings: Settings) -> PostgresMethod:
    """The `module:factory` entry point: retrieval.adapters.postgres:factory."""
    return PostgresMethod()
