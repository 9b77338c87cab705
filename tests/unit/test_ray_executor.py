"""`executor = "ray"` on a real 2-node Ray cluster (ray.cluster_utils.Cluster, started once for the
module: about 8 s on an idle 2-core machine, up to 25 s loaded): the sharded run must give the
single-process run's figures, top 10 and report, and survive a killed worker and a lost node; a
recording embeds the corpus on the cluster and writes the same vector store as one process.

The faults end in one line and exit 2 within the `ray_timeout` bound (short here): a bad address,
none reachable, a cluster killed mid-run (a cluster of its own, in a subprocess), a local Ray whose
agent dies at start-up; a local Ray writes its files in the project's `.cache/ray` and removes them.

Ray writes only under a temporary folder of its own (RAY_TMPDIR), binds to loopback, starts no
dashboard and sends no usage statistics; the module's teardown checks that no Ray process is left.
The module is `slow` (`pytest -m slow`); under xdist its tests share one worker (conftest.py).
"""

from __future__ import annotations

import contextlib
import functools
import gc
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytestmark = pytest.mark.slow

ray = pytest.importorskip(
    "ray", reason="Ray is not installed here: pip install 'retrieval-regression[ray]' (wheels for CPython 3.11-3.14)"
)

from demo_fixture import demo_dataset, demo_settings  # noqa: E402
from fake_embeddings import FakeEmbeddingsServer, make_profile  # noqa: E402
from generated_corpus import fixture_vectors, generated_dataset  # noqa: E402
from ray import cloudpickle  # noqa: E402
from ray.cluster_utils import Cluster  # noqa: E402

import retrieval.executors.ray_cluster as ray_executor  # noqa: E402
from retrieval.config import Settings  # noqa: E402
from retrieval.evaluation.embeddings import embed_texts  # noqa: E402
from retrieval.evaluation.evaluate import evaluate  # noqa: E402
from retrieval.executors.ray_cluster import ClusterEmbeddings, search_on_cluster  # noqa: E402
from retrieval.measures.metrics import metric_names, score_method  # noqa: E402
from retrieval.methods.base import Context  # noqa: E402
from retrieval.methods.bm25 import BM25Method  # noqa: E402
from retrieval.methods.hybrid import HybridMethod  # noqa: E402
from retrieval.methods.support.bm25_shards import AnalysedShard, BM25Sharding  # noqa: E402
from retrieval.methods.vector import SCORE_DECIMALS, VectorMethod  # noqa: E402
from retrieval.providers.base import ProviderError  # noqa: E402
from retrieval.providers.openai_embeddings import OpenAIEmbeddings  # noqa: E402
from retrieval.recording.cassette_files import STORE_MANIFEST  # noqa: E402
from retrieval.report.build import build_report, render_json  # noqa: E402
from retrieval.report.sections import render_markdown  # noqa: E402
from retrieval.run.ranking import Ranking  # noqa: E402
from retrieval.run.results import Run  # noqa: E402


@dataclass
class Lab:
    cluster: Cluster
    folder: Path


def _ray_processes(folder: Path) -> list[int]:
    """Processes whose command line names the cluster's folder (every Ray daemon and worker does)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                command = (entry / "cmdline").read_bytes()
            except OSError:
                continue
            if str(folder).encode() in command:
                found.append(int(entry.name))
    return found


@pytest.fixture(scope="module")
def lab() -> Iterator[Lab]:
    # Short on purpose: Ray's socket paths under it must stay below 108 characters.
    folder = Path(tempfile.mkdtemp(prefix="ray", dir=tempfile.gettempdir()))
    with pytest.MonkeyPatch.context() as env:
        env.setenv("RAY_TMPDIR", str(folder))  # everything Ray writes, its address file included
        # Node addresses 127.0.0.1, not the host's: read by Ray's daemons at start, and by this
        # process's Ray from the constant it set when imported.
        env.setenv("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
        env.setattr(ray._private.ray_constants, "ENABLE_RAY_CLUSTER", False)
        env.setenv("RAY_USAGE_STATS_ENABLED", "0")  # no report sent anywhere
        (folder / "ray").mkdir()
        cluster = Cluster(
            initialize_head=True,
            head_node_args={"num_cpus": 1, "temp_dir": str(folder / "ray"), "include_dashboard": False},
        )
        try:
            cluster.add_node(num_cpus=1)
            assert cluster.address.startswith("127.0.0.1:"), cluster.address
            ray.init(address=cluster.address, log_to_driver=False)
            # The fault-injecting searches below are defined here: the workers get them by value.
            for module in (__name__, "fake_embeddings", "loopback_http"):
                cloudpickle.register_pickle_by_value(sys.modules[module])
            yield Lab(cluster, folder)
        finally:
            ray.shutdown()
            cluster.shutdown()
    deadline = time.monotonic() + 10
    while _ray_processes(folder) and time.monotonic() < deadline:
        time.sleep(0.2)
    left = _ray_processes(folder)
    shutil.rmtree(folder, ignore_errors=True)
    assert not left, f"Ray processes left behind: {left}"


@pytest.fixture(scope="module")
def generated() -> Context:
    dataset = generated_dataset(20_000, 300)
    context = Context(dataset=dataset, depth=1000)
    context.document_vectors = fixture_vectors([d.content for d in dataset.documents])
    context.question_vectors = fixture_vectors([q.text for q in dataset.questions])
    return context


def _timeless(run: Run) -> Run:
    # Wall times differ between any two runs; everything else must not.
    for usage in run.usage.values():
        usage.seconds = 0.0
    return run


def _top10(run: Run, method: str) -> dict[str, list[tuple[str, float]]]:
    return {
        r.question.id: list(zip(r.methods[method].ids[:10], r.methods[method].scores[:10], strict=True))
        for r in run.results
    }


def test_demo_on_the_cluster_equals_the_single_process_run(lab: Lab, monkeypatch: pytest.MonkeyPatch) -> None:
    sharded: list[int] = []
    real = ray_executor.search_on_cluster

    def spy(search: Any, context: Context, n_shards: int | None = None) -> list[Ranking]:
        sharded.append(len(context.dataset.documents))
        return real(search, context, n_shards)

    monkeypatch.setattr(ray_executor, "search_on_cluster", spy)
    dataset = demo_dataset()
    local = _timeless(evaluate(dataset, demo_settings()))
    on_cluster = _timeless(evaluate(dataset, demo_settings(executor="ray")))

    assert len(sharded) == 2  # bm25 and vector went to the cluster; hybrid fused on the driver
    assert on_cluster.methods == local.methods == ["bm25", "vector", "hybrid"]
    for method in local.methods:
        assert _top10(on_cluster, method) == _top10(local, method), method
    local_report = build_report(local, dataset.documents, {})
    cluster_report = build_report(on_cluster, dataset.documents, {})
    assert cluster_report.scores == local_report.scores
    # The report says where the methods ran; nothing else differs.
    assert (local_report.executor, cluster_report.executor) == (
        {"name": "local"},
        {"name": "ray", "nodes": 2, "cpus": 2},
    )
    assert "\nRan on: ray, 2 node(s), 2 CPU(s).\n" in render_markdown(cluster_report)
    assert "Ran on" not in render_markdown(local_report)
    assert render_json(replace(cluster_report, executor=None)) == render_json(replace(local_report, executor=None))


def _figures(context: Context, rankings: Sequence[Ranking]) -> dict[str, float]:
    ids = context.dataset.doc_ids
    ranked = {q.id: [ids[i] for i in r.indices] for q, r in zip(context.dataset.questions, rankings, strict=True)}
    relevant = {q.id: q.relevant for q in context.dataset.questions}
    types = {q.id: q.type for q in context.dataset.questions}
    return score_method(ranked, relevant, types, metric_names(5)).overall


def _rounding_swaps(a: Sequence[Ranking], b: Sequence[Ranking]) -> int:
    """Top-10 positions that differ between two runs, each checked to be a near-tie: the two
    documents' scores within one rounding step. Any other difference fails the test."""
    swaps = 0
    step = 10.0**-SCORE_DECIMALS
    for x, y in zip(a, b, strict=True):
        for i in np.flatnonzero(x.indices[:10] != y.indices[:10]):
            assert abs(x.scores[i] - y.scores[i]) <= step, (x.indices[:10], y.indices[:10])
            swaps += 1
    return swaps


def test_20000_documents_on_the_cluster_give_the_single_process_figures(lab: Lab, generated: Context) -> None:
    executor = ray_executor.RayExecutor()
    rankings: dict[str, dict[str, list[Ranking]]] = {}
    for name, run in (("local", lambda m, c: m.rank(c)), ("ray", executor.rank)):
        context = replace(generated, rankings={})
        for method in (BM25Method(), VectorMethod()):
            context.rankings[method.name] = list(run(method, context))  # type: ignore[arg-type]
        context.rankings["hybrid"] = HybridMethod(("bm25", "vector"), 60).rank(context)
        rankings[name] = dict(context.rankings)

    # BM25 scores every shard with the global statistics: bit-identical, full depth.
    for x, y in zip(rankings["ray"]["bm25"], rankings["local"]["bm25"], strict=True):
        assert np.array_equal(x.indices, y.indices) and np.array_equal(x.scores, y.scores)
    swaps = {m: _rounding_swaps(rankings["ray"][m], rankings["local"][m]) for m in ("vector", "hybrid")}
    print(f"top-10 positions ordered differently within float rounding: {swaps}")
    for shown in ("bm25", "vector", "hybrid"):
        on_cluster, local = _figures(generated, rankings["ray"][shown]), _figures(generated, rankings["local"][shown])
        assert {k: round(v, 4) for k, v in on_cluster.items()} == {k: round(v, 4) for k, v in local.items()}, shown


class KilledOnce(BM25Sharding):
    """bm25's sharded search whose first scoring attempt kills its own worker process."""

    def __init__(self, marker: str) -> None:
        super().__init__(1.5, 0.75)
        self.marker = marker

    def score(self, prepared: Any, queries: Any, statistics: Any, depth: int) -> list[Ranking]:
        try:
            os.close(os.open(self.marker, os.O_CREAT | os.O_EXCL))
        except FileExistsError:
            return super().score(prepared, queries, statistics, depth)
        os._exit(1)  # the worker dies mid-task, as an OOM kill or a crash would


def test_a_killed_worker_costs_a_retry_not_the_run(lab: Lab, generated: Context) -> None:
    marker = lab.folder / "killed"
    whole = BM25Method().rank(generated)
    sharded = search_on_cluster(KilledOnce(str(marker)), generated, n_shards=2)
    assert marker.exists()  # a worker did die
    assert all(
        np.array_equal(x.indices, y.indices) and np.array_equal(x.scores, y.scores)
        for x, y in zip(sharded, whole, strict=True)
    )


class NodeLost(BM25Sharding):
    """bm25's sharded search that notes where each shard was indexed, and loses the worker node
    between the statistics and the scores: the shards it held must be indexed again."""

    hook: Any = None

    def __init__(self, folder: str) -> None:
        super().__init__(1.5, 0.75)
        self.folder = folder

    def __getstate__(self) -> dict[str, Any]:
        return {k: v for k, v in vars(self).items() if k != "hook"}  # the hook stays on the driver

    def prepare(self, documents: list[str], queries: list[list[str]]) -> AnalysedShard:
        node = ray.get_runtime_context().get_node_id()
        Path(self.folder, f"{node}-{os.getpid()}-{time.monotonic_ns()}").touch()
        return super().prepare(documents, queries)

    def combine(self, summaries: Sequence[Any]) -> Any:
        if self.hook is not None:
            self.hook()
        return super().combine(summaries)


def test_a_node_lost_mid_run_leaves_the_figures_unchanged(lab: Lab, generated: Context) -> None:
    folder = lab.folder / "prepared"
    folder.mkdir()
    worker = next(iter(lab.cluster.worker_nodes))
    search = NodeLost(str(folder))
    search.hook = functools.partial(lab.cluster.remove_node, worker)
    whole = BM25Method().rank(generated)
    try:
        sharded = search_on_cluster(search, generated, n_shards=2)
    finally:
        lab.cluster.add_node(num_cpus=1)  # the other tests' cluster again
        lab.cluster.wait_for_nodes()
    nodes = [name.name.split("-")[0] for name in folder.iterdir()]
    assert worker.node_id in nodes  # a shard was indexed on the node that was lost
    assert len(nodes) > 2  # ... and indexed again elsewhere
    assert all(
        np.array_equal(x.indices, y.indices) and np.array_equal(x.scores, y.scores)
        for x, y in zip(sharded, whole, strict=True)
    )


class DiesOnce:
    """A provider whose first call kills its actor's process, then embeds through the real client."""

    def __init__(self, url: str, marker: str) -> None:
        self.client = OpenAIEmbeddings(make_profile(url))
        self.marker = marker

    def embed(self, texts: Sequence[str], kind: Any) -> np.ndarray:
        try:
            os.close(os.open(self.marker, os.O_CREAT | os.O_EXCL))
        except FileExistsError:
            return self.client.embed(texts, kind)
        os._exit(1)


def embed_on_cluster(
    make_provider: Any, texts: Sequence[str], kind: Any, batch_size: int, concurrency: int
) -> np.ndarray:
    embeddings = ClusterEmbeddings(make_provider, batch_size, concurrency)
    try:
        return embeddings.embed(texts, kind)
    finally:
        embeddings.close()


class Refuses:
    def embed(self, texts: Sequence[str], kind: Any) -> np.ndarray:
        raise ProviderError("http 400: the model refused the batch", "http 400")


def test_corpus_embedding_on_the_cluster_gives_the_vectors_in_input_order(lab: Lab) -> None:
    server = FakeEmbeddingsServer()
    try:
        texts = [f"document {i}: {'mot ' * (i % 7)}" for i in range(40)]
        expected = embed_texts(OpenAIEmbeddings(make_profile(server.url)), texts, "document")
        one_call = len(server.posts)
        marker = lab.folder / "actor-killed"
        vectors = embed_on_cluster(
            functools.partial(DiesOnce, server.url, str(marker)), texts, "document", batch_size=3, concurrency=2
        )
        assert marker.exists()  # an actor died, its batch was sent again
        assert np.array_equal(vectors, expected)
        assert len(server.posts) == 2 * one_call  # every batch answered once more on the cluster, none lost
    finally:
        server.stop()


def test_a_batch_that_keeps_failing_fails_the_recording(lab: Lab, capfd: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(ProviderError, match="the model refused the batch"):
        embed_on_cluster(Refuses, ["a", "b", "c"], "document", batch_size=2, concurrency=2)
    # The other batch failed too: its error is read, not printed by Ray as unhandled (a traceback
    # in the middle of a passing run). Ray prints those when the reference is collected.
    gc.collect()
    time.sleep(2)
    assert "ProviderError" not in capfd.readouterr().err


class RefusingEmbeddingsServer(FakeEmbeddingsServer):
    """FIXTURE: the fake embeddings server, answering 503 to every batch with a text holding one of `refused`."""

    def __init__(self) -> None:
        super().__init__()
        self.refused: set[str] = set()

    def answer(self, body: dict[str, Any]) -> tuple[int, bytes]:
        if any(part in text for part in self.refused for text in body["input"]):
            return 503, b'{"error": "overloaded (fixture)"}'
        return super().answer(body)


@pytest.fixture
def cluster_embeddings_server() -> Iterator[RefusingEmbeddingsServer]:
    """The fixture embeddings server on a free port of 127.0.0.1 of its own, stopped after the test."""
    server = RefusingEmbeddingsServer()
    try:
        yield server
    finally:
        server.stop()


def _recording_settings(folder: Path, url: str, executor: str) -> Settings:
    # batch_size 3 and 2 workers: the demo's 60 documents are 20 batches spread over 2 actors.
    return Settings(
        profile=make_profile(url, embedding_workers=2, retry_attempts=2, retry_backoff=0.01),
        methods=("bm25", "vector", "hybrid"),
        cassettes=str(folder / "cassettes"),
        cache=str(folder / "cache"),
        executor=executor,
    )


def _files(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def _counted(run: Run) -> dict[str, dict[str, float | int]]:
    return {stage: {k: v for k, v in u.as_dict().items() if k != "seconds"} for stage, u in run.usage.items()}


def test_a_recording_on_the_cluster_writes_the_store_one_process_writes(
    lab: Lab, tmp_path: Path, cluster_embeddings_server: RefusingEmbeddingsServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    dataset = demo_dataset()
    url = cluster_embeddings_server.url
    local = evaluate(dataset, _recording_settings(tmp_path / "local", url, "local"), mode="record")
    sent_locally = len(cluster_embeddings_server.posts)

    # On the driver, only the questions may be embedded: the documents go to the actors, whose
    # providers are built in their own processes (this patch does not reach them).
    driver_kinds: list[str] = []
    real_embed = OpenAIEmbeddings.embed

    def on_the_driver(self: OpenAIEmbeddings, texts: Sequence[str], kind: Any) -> np.ndarray:
        driver_kinds.append(kind)
        return real_embed(self, texts, kind)

    monkeypatch.setattr(OpenAIEmbeddings, "embed", on_the_driver)
    on_cluster = evaluate(dataset, _recording_settings(tmp_path / "ray", url, "ray"), mode="record")
    # A live run without a store embeds the corpus on the cluster too, through the `.cache/` store.
    live_settings = _recording_settings(tmp_path / "live", url, "ray")
    live = evaluate(dataset, live_settings, mode="live")
    monkeypatch.undo()
    assert len(list((tmp_path / "live" / "cache").rglob("*"))) > 0

    assert set(driver_kinds) == {"query"}
    assert len(cluster_embeddings_server.posts) == 3 * sent_locally  # the same calls, none repeated
    vectors = _files(tmp_path / "ray" / "vectors")
    assert [name.split(".", 1)[1] for name in vectors] == ["keys.npy", "vectors.npy"]  # one segment
    assert vectors == _files(tmp_path / "local" / "vectors")  # the same segment, byte for byte
    manifest = f"fixture/{STORE_MANIFEST}"
    assert _files(tmp_path / "ray" / "cassettes")[manifest] == _files(tmp_path / "local" / "cassettes")[manifest]
    assert _counted(on_cluster) == _counted(local)  # the actors' calls and tokens counted on the driver
    for method in local.methods:
        assert _top10(on_cluster, method) == _top10(local, method) == _top10(live, method), method


def test_a_corpus_batch_that_keeps_failing_on_the_cluster_replaces_nothing(
    lab: Lab, tmp_path: Path, cluster_embeddings_server: RefusingEmbeddingsServer
) -> None:
    dataset = demo_dataset()
    settings = _recording_settings(tmp_path, cluster_embeddings_server.url, "ray")
    first = evaluate(dataset, settings, mode="record")
    before = _files(tmp_path / "cassettes"), _files(tmp_path / "vectors")
    changed = "Un texte que le serveur refuse toujours."
    edited = replace(dataset, documents=(replace(dataset.documents[0], text=changed), *dataset.documents[1:]))
    cluster_embeddings_server.refused.add(changed)
    with pytest.raises(ProviderError, match="503"):
        evaluate(edited, settings, mode="record")
    refused = [p for p in cluster_embeddings_server.posts if changed.encode() in p["raw"]]
    assert len(refused) == 2  # the profile's two attempts, each refused; no third from Ray
    assert (_files(tmp_path / "cassettes"), _files(tmp_path / "vectors")) == before
    assert _top10(evaluate(dataset, settings, mode="replay"), "vector") == _top10(first, "vector")


# --- Faults: each one line and exit 2, within the bound --------------------------------------------

FIXTURE_DATASET = Path(__file__).parent / "fixtures" / "fixture_native"


@dataclass
class Ended:
    code: int
    err: str
    seconds: float


def _command(cwd: Path, *flags: str, env: dict[str, str] | None = None, prefix: str = "") -> Ended:
    """`python -m retrieval` (or `prefix` then the CLI) in `cwd`, its own Ray settings: no
    inherited RAY_ADDRESS or RAY_TMPDIR, loopback addresses, no usage report. Bounded: 240 s."""
    environ = {k: v for k, v in os.environ.items() if k not in ("RAY_ADDRESS", "RAY_TMPDIR")}
    environ.update(RAY_USAGE_STATS_ENABLED="0", RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER="0", **(env or {}))
    environ["PYTHONPATH"] = os.pathsep.join([str(Path(__file__).parent), environ.get("PYTHONPATH", "")])
    script = prefix + "\nfrom retrieval.cli import main\nraise SystemExit(main(sys.argv[1:]))"
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-c", "import sys\n" + script, "--dataset", str(FIXTURE_DATASET), *flags],
        cwd=cwd,
        env=environ,
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    return Ended(done.returncode, done.stderr, time.monotonic() - started)


@pytest.fixture
def project() -> Iterator[Path]:
    """A short project folder (Ray's socket paths under its .cache/ray must stay short)."""
    folder = Path(tempfile.mkdtemp(prefix="rp", dir=tempfile.gettempdir()))
    try:
        yield folder
    finally:
        for pid in _ray_processes(folder):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        shutil.rmtree(folder, ignore_errors=True)


@pytest.mark.parametrize(
    ("address", "line"),
    [
        ("garbage", "error: RAY_ADDRESS='garbage' is not a Ray cluster address (it names no port): give"),
        ("http://[::1", "error: RAY_ADDRESS='http://[::1' is not a Ray cluster address (the scheme http:// is"),
        ("127.0.0.1:1", "error: cannot reach the Ray cluster at 127.0.0.1:1 (RAY_ADDRESS): Connection refused."),
    ],
)
def test_a_bad_or_unreachable_address_is_one_line_and_exit_2(project: Path, address: str, line: str) -> None:
    ended = _command(project, "--executor", "ray", "--methods", "bm25", env={"RAY_ADDRESS": address})
    assert (ended.code, ended.err.count("\n"), ended.err.startswith(line)) == (2, 1, True), ended.err[-2000:]
    assert list(project.iterdir()) == []  # nothing written


CLUSTER = textwrap.dedent(
    """
    import os, sys, time
    from pathlib import Path
    import ray
    ray._private.ray_constants.ENABLE_RAY_CLUSTER = False
    from ray.cluster_utils import Cluster
    folder, client_port = Path(sys.argv[1]), int(sys.argv[2])
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "temp_dir": str(folder / "ray"),
                                                           "include_dashboard": False,
                                                           "ray_client_server_port": client_port})
    (folder / "address").write_text(cluster.address)
    time.sleep(180)  # bounded: the test kills it long before
    """
)


@pytest.fixture
def side_cluster() -> Iterator[tuple[Path, str, int]]:
    """A one-node cluster in a process of its own (its folder, GCS address, Ray Client port),
    for the test that kills it; its processes killed after."""
    folder = Path(tempfile.mkdtemp(prefix="rk", dir=tempfile.gettempdir()))
    with socket.socket() as free:
        free.bind(("127.0.0.1", 0))
        client_port = free.getsockname()[1]
    # The cluster's workers import the fixture method from here, as a team's cluster has its code.
    here = str(Path(__file__).parent)
    environ = {**os.environ, "RAY_TMPDIR": str(folder), "RAY_USAGE_STATS_ENABLED": "0", "PYTHONPATH": here}
    environ.update(RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER="0")  # its Ray Client server too: 127.0.0.1
    environ.pop("RAY_ADDRESS", None)
    head = subprocess.Popen([sys.executable, "-c", CLUSTER, str(folder), str(client_port)], env=environ)
    try:
        deadline = time.monotonic() + 120
        while not (folder / "address").exists() and time.monotonic() < deadline and head.poll() is None:
            time.sleep(0.2)
        yield folder, (folder / "address").read_text(), client_port
    finally:
        head.kill()
        head.wait(10)
        for pid in _ray_processes(folder):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        shutil.rmtree(folder, ignore_errors=True)


def test_a_cluster_killed_mid_run_is_one_line_and_exit_2_within_the_bound(
    project: Path, side_cluster: tuple[Path, str, int]
) -> None:
    folder, address, _ = side_cluster
    deadline = time.monotonic() + 120
    (project / "retrieval.toml").write_text('methods = ["slow_shards:factory"]\n', encoding="utf-8")
    marker = project / "waiting"
    env = {"RAY_ADDRESS": address, "SLOW_SHARDS_MARKER": str(marker)}
    with ThreadPoolExecutor(1) as pool:
        running = pool.submit(_command, project, "--executor", "ray", "--ray-timeout", "5", env=env)
        while not marker.exists() and time.monotonic() < deadline and not running.done():
            time.sleep(0.2)
        assert marker.exists(), running.result().err[-2000:] if running.done() else "no shard started"
        gcs = [pid for pid in _ray_processes(folder) if b"gcs_server" in Path(f"/proc/{pid}/cmdline").read_bytes()]
        killed = time.monotonic()
        for pid in gcs:
            os.kill(pid, signal.SIGKILL)
        ended = running.result()
    waited = time.monotonic() - killed
    assert len(gcs) == 1
    assert ended.code == 2, ended.err[-2000:]
    assert ended.err == (
        "error: lost the Ray cluster: it has not answered for 5 s (ray_timeout) while the run waited for it. "
        "Nothing was written; run again when the cluster is back.\n"
    )
    assert waited < 5 + 60  # the bound, the watch's last call and the shutdown's bound, never the shard's 120 s
    assert sorted(p.name for p in project.iterdir()) == ["retrieval.toml", "waiting"]  # nothing written


def test_a_local_ray_writes_in_the_project_cache_and_removes_its_session(project: Path) -> None:
    ended = _command(project, "--executor", "ray", "--methods", "bm25", "--ray-timeout", "120")
    assert ended.code == 0, ended.err[-2000:]
    assert [p.name for p in (project / ".cache" / "ray").iterdir()] == []  # its session folder, removed
    assert _ray_processes(project) == []


DYING_AGENT = """
import ray._private.services as services
from ray._private import ray_constants
real = services._build_python_executable_command_memory_profileable
def dying(process_type, *args, **kwargs):
    if process_type == ray_constants.PROCESS_TYPE_DASHBOARD_AGENT:
        return [sys.executable, "-c", "import os; os._exit(1)"]  # the agent dies as it starts
    return real(process_type, *args, **kwargs)
services._build_python_executable_command_memory_profileable = dying
"""


def test_a_local_ray_whose_agent_dies_at_start_up_is_one_line_and_exit_2(project: Path) -> None:
    ended = _command(project, "--executor", "ray", "--methods", "bm25", "--ray-timeout", "120", prefix=DYING_AGENT)
    assert ended.code == 2, ended.err[-2000:]
    assert ended.err.startswith("error: a local Ray did not start: ") and ended.err.count("\n") == 1, ended.err
    assert [p.name for p in (project / ".cache" / "ray").iterdir()] == []
