"""Recall quality: does an agent's memory find the message that answers a question?

Several sets. FriendsQA dev (in-sample: the data is visible to us): every scene becomes a group
channel of named humans observed by one or two synthetic agents, scenes spread over a few agents
so each agent's memory holds many scenes; each question is searched across the whole memory of
every agent that observed its scene, and its gold evidence is the answering utterance(s). The
paraphrase set (bench/data/paraphrases.jsonl, written blind): short conversations with
distractors, and questions that share few words with the answer. The customer-memory set
(bench/data/customer_memory.jsonl, written blind, the same shape): customer-service
conversations of 8-14 messages, each stating several details of the same kinds, and the
question an assistant would later ask its memory about that customer (the issue's top-1
target is for such questions); a second, third and fourth such set by other blind authors
(bench/data/customer_memory_b.jsonl, customer_memory_c.jsonl, customer_memory_d.jsonl), each
held out until ranking had been designed against the ones before. A fifth customer set asks
blind questions of real conversations: tau-bench's airline chats, read from ../shared/data
(bench/taucustomer.py); held out when first run, read in design since 2026-12-06. The
long-conversation set (bench/data/long_conversations.jsonl, written blind; bench/longconv.py):
six conversations of two people over twelve sittings each, about 220 messages, with questions
whose evidence is every message stating the answer; its conversations alternate between the
dev and test halves (`--split`).

The sets are built in bench/recallsets.py. Memory is written in-process through the real stages
and the graph writer (no Celery: this measures the read side) into a private Neo4j, then
embedded. Retrievers, side by side: the graph's keyword, vector and hybrid recall, and a
reference plain BM25 over raw messages (alone and over +-1 neighbour windows). Scores count a
budget of K messages, not K items (see bench/recall_metric.py). A last row, `context`, asks
`build_context` in the answer's channel with the question as its query, at the default budget,
and counts its commitments, facts and memories in that order: how often the answer is anywhere
in what an agent is told, what that costs in tokens, and how much of the conversation it shows.

`--held` asks each question held to the channel of its answer, as `build_context` recalls in the
conversation it is built for (and a platform asks in the customer's own channel): the right
conversation is then given, and only the window within it is chosen. The BM25 references are
held to the same channel.

FriendsQA questions are split in two halves by a hash of their scene's title (`--split`): a dev
half that ranking may be designed against and a test half that is only run to report. Memory
holds every scene either way; the split only chooses which questions are asked.

Run: `.venv/bin/python -m bench.recall [--data DIR] [--split dev|test|all] [--limit-scenes N]
[--one-channel] [--held] [--json [PATH]] [--sets friends,paraphrases,customer,customer-b,
customer-c,customer-d,customer-e,customer-f,customer-g,customer-h,customer-tau,long]`
(`--reference-only`: no Neo4j, the BM25 references alone). Figures: docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from bench.bm25 import BM25, Document, windows
from bench.recall_metric import CUTOFFS, Scores, messages_needed, score, split_by_reference
from bench.recallsets import (
    CUSTOMER_B_TENANT,
    CUSTOMER_C_AGENT_SPEAKERS,
    CUSTOMER_C_TENANT,
    CUSTOMER_D_AGENT_SPEAKERS,
    CUSTOMER_D_TENANT,
    CUSTOMER_E_TENANT,
    CUSTOMER_F_AGENT_SPEAKERS,
    CUSTOMER_F_TENANT,
    CUSTOMER_G_AGENT_SPEAKERS,
    CUSTOMER_G_TENANT,
    CUSTOMER_H_AGENT_SUFFIX,
    CUSTOMER_H_TENANT,
    CUSTOMER_MEMORY,
    CUSTOMER_MEMORY_B,
    CUSTOMER_MEMORY_C,
    CUSTOMER_MEMORY_D,
    CUSTOMER_MEMORY_E,
    CUSTOMER_MEMORY_F,
    CUSTOMER_MEMORY_G,
    CUSTOMER_MEMORY_H,
    CUSTOMER_TENANT,
    SETS,
    SPLITS,
    Case,
    Corpus,
    data_root,
    friends_corpus,
    long_corpus,
    paraphrase_corpus,
    speakers_ending,
    sync_jobs,
    tau_corpus,
)
from pipeline.context import DEFAULT_BUDGET_TOKENS
from pipeline.extract import RulesExtractor
from pipeline.graph.writer import write_sync_jobs
from pipeline.lens import BUILTIN_LENSES
from pipeline.memorize import memorize
from schemas.records import SyncJob

GRAPH_MODES = ("keyword", "vector", "hybrid")
# build_context with the question as its query, in the answer's channel, at the default budget:
# what an agent is told, in reading order (commitments, facts, then recalled memories).
CONTEXT = "context"
REFERENCE = "bm25 raw"  # plain BM25 over single messages: the reference retriever
WRITE_BATCH = 20  # events per writer transaction, like a worker's batch
BUDGET = max(CUTOFFS)

# (agent id, question, channel id or None: the whole memory) -> item evidence lists
Ranker = Callable[[str, str, str | None], list[list[str]]]


# --- reference retrievers --------------------------------------------------------------------


def reference_rankers(jobs: Sequence[SyncJob]) -> dict[str, Ranker]:
    """Plain BM25 per agent over the raw text of every message it observed, and over windows;
    over one channel's messages when a question is held to it."""
    channels: dict[str, dict[str, list[tuple[str, str]]]] = {}
    for job in jobs:
        per_channel = channels.setdefault(job.agent.id, {}).setdefault(job.channel.id, [])
        per_channel.extend((m.id, m.content) for m in job.messages)
    raw: dict[tuple[str, str | None], BM25] = {}
    windowed: dict[tuple[str, str | None], BM25] = {}
    for agent_id, by_channel in channels.items():
        everything = [message for msgs in by_channel.values() for message in msgs]
        raw[agent_id, None] = BM25([Document(text, (mid,)) for mid, text in everything])
        windowed[agent_id, None] = BM25([d for msgs in by_channel.values() for d in windows(msgs)])
        for channel_id, msgs in by_channel.items():
            raw[agent_id, channel_id] = BM25([Document(text, (mid,)) for mid, text in msgs])
            windowed[agent_id, channel_id] = BM25(windows(msgs))

    def ranker(index: dict[tuple[str, str | None], BM25]) -> Ranker:
        def rank(agent_id: str, question: str, channel_id: str | None) -> list[list[str]]:
            return [list(d.evidence) for d in index[agent_id, channel_id].search(question, BUDGET)]

        return rank

    return {REFERENCE: ranker(raw), "bm25 +-1": ranker(windowed)}


# --- graph retrievers ------------------------------------------------------------------------


@dataclass
class GraphSide:
    """A private Neo4j holding the corpora, and recall bound to it (or why it is unavailable)."""

    rankers: dict[str, Ranker] = field(default_factory=dict)
    # The tokens each context used, per tenant, in the order the questions were asked.
    context_tokens: dict[str, list[int]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    timings: dict[str, float] = field(default_factory=dict)


@contextmanager
def graph_side(
    corpora: Sequence[tuple[Corpus, list[SyncJob]]],
    embedder_name: Literal["minilm", "wordllama"] = "minilm",
    in_context: bool = True,
) -> Iterator[GraphSide]:
    """Start Neo4j, write every corpus through the writer, embed, and bind the three modes."""
    side = GraphSide()
    if not corpora:
        yield side
        return
    # Imported here so the reference figures still print while the read side is being built.
    try:
        from memsync.settings import Settings
        from pipeline.embedder import make_embedder, query_precision
        from pipeline.graph.context import build_context
        from pipeline.graph.contextvectors import embed_batch
        from pipeline.graph.embeddings import EMBEDDED_LABELS
        from pipeline.graph.schema import init_schema
        from pipeline.graph.search import recall
        from pipeline.graph.segments import extend_segments
        from pipeline.graph.store import GraphStore
        from schemas.recall import RecallMode, RecallQuery
        from workers.local import services
    except ImportError as exc:
        side.notes.append(f"graph retrievers unavailable: {exc}")
        yield side
        return

    settings = Settings(trust_mode="open", embedder=embedder_name, embed_context=in_context)
    # As in production: memory is embedded as an embed worker does (float), questions as a
    # reader does (int8 unless MEMSYNC_QUANTIZED_QUERIES=false).
    embedder = make_embedder(settings)
    storing = make_embedder(settings, use="batches")
    if embedder is None or storing is None:
        side.notes.append("embedder none: the graph retrievers need one")
        yield side
        return
    root = Path(tempfile.mkdtemp(prefix="memsync-recall-"))
    port = services.free_port()
    started = time.perf_counter()
    neo4j = services.start_neo4j("127.0.0.1", port, root / "neo4j", settings.state_dir)
    graph = GraphStore.connect(
        f"bolt://127.0.0.1:{port}",
        "neo4j",
        None,
        "neo4j",
        vector_cache_mb=settings.recall_vector_cache_mb,
    )
    try:
        init_schema(graph, vector_dimensions=embedder.dimensions)
        side.timings["start neo4j"] = time.perf_counter() - started
        started = time.perf_counter()
        for _, jobs in corpora:
            for start in range(0, len(jobs), WRITE_BATCH):
                batch = jobs[start : start + WRITE_BATCH]
                write_sync_jobs(graph, batch, memorize(batch, RulesExtractor(), BUILTIN_LENSES))
        side.timings["write memory"] = time.perf_counter() - started
        # What the workers' fold checks do after each sync (workers/worker/folding.py).
        started = time.perf_counter()
        for corpus, jobs in corpora:
            pairs = sorted({(job.agent.key, job.channel.key) for job in jobs})
            for agent_key, channel_key in pairs:
                extend_segments(graph, corpus.tenant, agent_key, channel_key)
        side.timings["segment"] = time.perf_counter() - started
        started = time.perf_counter()
        embedded = 0
        for label in EMBEDDED_LABELS:
            while True:
                read, stored = embed_batch(
                    graph, storing, label, settings.embed_batch, in_context=in_context
                )
                embedded += stored
                if not read:
                    break
                if not stored:  # nodes that stay pending would loop forever: say so instead
                    side.notes.append(f"{read} {label} nodes could not be embedded")
                    break
        side.timings["embed"] = time.perf_counter() - started
        how = "in conversation" if in_context else "one message each"
        side.notes.append(
            f"embedded {embedded} nodes with {embedder.model}, episodes {how}; "
            f"questions embedded in {query_precision(settings)}"
        )

        def ranker(tenant: str, mode: RecallMode) -> Ranker:
            def rank(agent_id: str, question: str, channel_id: str | None) -> list[list[str]]:
                query = RecallQuery(
                    tenant=tenant,
                    agent_id=agent_id,
                    channel_id=channel_id,
                    query=question,
                    limit=BUDGET,
                    mode=mode,
                )
                items = recall(graph, query, embedder=embedder, dm_policy=settings.dm_memory_policy)
                return [list(item.evidence) for item in items]

            return rank

        def contexter(tenant: str) -> Ranker:
            used = side.context_tokens.setdefault(tenant, [])

            def rank(agent_id: str, question: str, channel_id: str | None) -> list[list[str]]:
                if channel_id is None:
                    raise ValueError("a context is built in a channel: hold it to the answer's")
                context = build_context(
                    graph,
                    tenant,
                    agent_id,
                    channel_id,
                    query=question,
                    embedder=embedder,
                    dm_policy=settings.dm_memory_policy,
                )
                used.append(context.used_tokens)
                return [
                    *(list(c.evidence) for c in context.commitments),
                    *(list(f.evidence) for f in context.facts),
                    *(list(m.evidence) for m in context.memories),
                ]

            return rank

        modes: tuple[RecallMode, ...] = ("keyword", "vector", "hybrid")
        for corpus, _ in corpora:
            for mode in modes:
                side.rankers[f"{corpus.tenant}/{mode}"] = ranker(corpus.tenant, mode)
            side.rankers[f"{corpus.tenant}/{CONTEXT}"] = contexter(corpus.tenant)
        yield side
    finally:
        graph.close()
        neo4j.stop()
        shutil.rmtree(root, ignore_errors=True)


def answer_channels(corpus: Corpus) -> dict[str, str]:
    """The channel of every message the corpus loads, by message id."""
    return {
        message["id"]: event["channel"]["id"]
        for event in corpus.events
        for message in event["messages"]
    }


# --- scoring and report ----------------------------------------------------------------------


@dataclass
class Result:
    """Per retriever: the budget each case needed and whether the top item hit, by agent; or
    the error that stopped it (the other retrievers still report)."""

    needed: dict[str, list[int | None]] = field(default_factory=dict)
    in_order: list[int | None] = field(default_factory=list)  # the same, in the cases' order
    first_in_order: list[bool] = field(default_factory=list)  # the top item hit, in order
    top1: dict[str, list[bool]] = field(default_factory=dict)
    # Messages the top item carries: a "top-1 item" hit on a five-message window is lenient.
    top1_sizes: list[int] = field(default_factory=list)
    # Distinct messages the whole ranking shows, in the cases' order.
    shown: list[int] = field(default_factory=list)
    seconds: float = 0.0
    error: str | None = None


def evaluate(cases: Sequence[Case], rank: Ranker, held: Mapping[str, str] | None = None) -> Result:
    """Every case asked of `rank`; with `held` (message id to channel id), each held to the
    channel of its answering messages (one conversation's), as `build_context` asks in one."""
    result = Result()
    started = time.perf_counter()
    for case in cases:
        channel = held[min(case.gold)] if held is not None else None
        try:
            ranking = rank(case.agent, case.question, channel)
        except Exception as exc:  # a bench reports a broken retriever and goes on
            result.error = f"{type(exc).__name__}: {str(exc).splitlines()[0][:300]}"
            break
        needed = messages_needed(ranking, case.gold)
        result.needed.setdefault(case.agent, []).append(needed)
        result.in_order.append(needed)
        first = bool(ranking) and any(m in case.gold for m in ranking[0])
        result.top1.setdefault(case.agent, []).append(first)
        result.first_in_order.append(first)
        result.top1_sizes.append(len(ranking[0]) if ranking else 0)
        result.shown.append(len({m for item in ranking for m in item}))
    result.seconds = time.perf_counter() - started
    return result


def overall(result: Result) -> Scores:
    return score(v for values in result.needed.values() for v in values)


def top1_rate(result: Result) -> float:
    hits = [v for values in result.top1.values() for v in values]
    return sum(hits) / len(hits) if hits else 0.0


def report(
    corpus: Corpus, results: dict[str, Result], context_tokens: Sequence[int] = ()
) -> dict[str, Any]:
    """Print one corpus's table (overall, then recall@1/5/10 per agent) and return it as JSON;
    `context_tokens`: what each question's context used, when the context row ran."""
    print(f"\n{corpus.name}: {len(corpus.cases)} questions ({'; '.join(corpus.notes)})")
    heads = " ".join(f"{'R@' + str(k):>6}" for k in CUTOFFS)
    print(f"{'retriever':<12} {'top-1 item':>10} {'size':>5} {heads} {'MRR':>6} {'ms/q':>6}")
    figures: dict[str, Any] = {}
    agents = sorted({c.agent for c in corpus.cases})
    for name, result in results.items():
        if result.error is not None:
            print(f"{name:<12} failed: {result.error}")
            figures[name] = {"error": result.error}
            continue
        scores = overall(result)
        per_query = 1000 * result.seconds / max(1, scores.questions)
        recalls = " ".join(f"{scores.recall[k]:>6.3f}" for k in CUTOFFS)
        top1 = top1_rate(result)
        size = sum(result.top1_sizes) / max(1, len(result.top1_sizes))
        print(
            f"{name:<12} {top1:>10.3f} {size:>5.1f} {recalls} {scores.mrr:>6.3f} {per_query:>6.1f}"
        )
        figures[name] = {
            **scores.as_json(),
            "top1_item": round(top1, 4),
            "top1_item_messages": round(size, 2),
            "ms_per_question": round(per_query, 2),
            "per_agent": {a: score(result.needed.get(a, [])).as_json() for a in agents},
        }
    strata(results, figures)
    channels = answer_channels(corpus)
    sizes = Counter(channels.values())
    told(
        results.get(CONTEXT),
        context_tokens,
        [sizes[channels[min(case.gold)]] for case in corpus.cases],
        figures,
    )
    kinds = sorted({c.kind for c in corpus.cases if c.kind})
    if kinds:
        print(f"recall@{BUDGET} per question type: " + "  ".join(f"{k:>10}" for k in kinds))
        for name, result in results.items():
            if result.error is not None:
                continue
            by_kind = {
                k: [n for n, c in zip(result.in_order, corpus.cases, strict=True) if c.kind == k]
                for k in kinds
            }
            row = [score(by_kind[k]).recall[BUDGET] for k in kinds]
            print(f"  {name:<12}                 " + "  ".join(f"{v:>10.3f}" for v in row))
            figures[name]["per_kind"] = {k: score(by_kind[k]).as_json() for k in kinds}
    if len(agents) > 1:
        cells = [f"{a + ' R@' + str(k):>12}" for a in agents for k in CUTOFFS]
        print("recall per agent:" + " ".join(cells))
        for name, result in results.items():
            if result.error is None:
                per_agent = [score(result.needed.get(a, [])) for a in agents]
                row = [s.recall[k] for s in per_agent for k in CUTOFFS]
                print(f"  {name:<15}" + " ".join(f"{v:>12.3f}" for v in row))
    return figures


def told(
    result: Result | None,
    tokens: Sequence[int],
    channel_sizes: Sequence[int],
    figures: dict[str, Any],
) -> None:
    """Print and add to `figures` how often the answer is anywhere in the context an agent is
    given (build_context at its default budget), what that context costs, and how much of the
    conversation it shows (`channel_sizes`: the messages of each case's channel): in a short
    conversation a context may hold most of it, and the first figure then says little."""
    if result is None or result.error is not None or not result.in_order:
        return
    found = sum(needed is not None for needed in result.in_order)
    share = found / len(result.in_order)
    mean_tokens = sum(tokens) / len(tokens) if tokens else 0.0
    mean_shown = sum(result.shown) / len(result.shown)
    of_channel = sum(n / max(1, size) for n, size in zip(result.shown, channel_sizes, strict=True))
    of_channel /= len(result.shown)
    figures[CONTEXT]["answer_in_context"] = round(share, 4)
    figures[CONTEXT]["tokens_used_mean"] = round(mean_tokens, 1)
    figures[CONTEXT]["messages_shown_mean"] = round(mean_shown, 2)
    figures[CONTEXT]["share_of_channel_shown"] = round(of_channel, 4)
    print(
        f"{CONTEXT}: the answer anywhere in what build_context tells the agent (its channel, "
        f"{DEFAULT_BUDGET_TOKENS} tokens): {found}/{len(result.in_order)} = {share:.3f}; "
        f"{mean_tokens:.0f} tokens and {mean_shown:.1f} messages on average, "
        f"{of_channel:.0%} as many as its channel holds"
    )


def strata(results: dict[str, Result], figures: dict[str, Any]) -> None:
    """Each graph retriever's top-1 item on the questions plain BM25 answers with its first
    message (they share the answer's words) and on the rest, printed and added to `figures`."""
    reference = results.get(REFERENCE)
    if reference is None or reference.error is not None:
        return
    cells: list[str] = []
    for name in GRAPH_MODES:
        result = results.get(name)
        if result is None or result.error is not None:
            continue
        (easy, n_easy), (hard, n_hard) = split_by_reference(
            reference.first_in_order, result.first_in_order
        )
        figures[name]["top1_item_where_reference_first"] = [easy, n_easy]
        figures[name]["top1_item_elsewhere"] = [hard, n_hard]
        cells.append(f"{name} {easy}/{n_easy} and {hard}/{n_hard}")
    if cells:
        print(
            f"top-1 item where {REFERENCE}'s first message answers, and elsewhere: "
            + ", ".join(cells)
        )


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--data", type=Path, help="data tree (default ../shared/data)")
    parser.add_argument(
        "--split",
        choices=SPLITS,
        default="all",
        help="which half of the FriendsQA questions to ask (scenes split by a hash of the title)",
    )
    parser.add_argument(
        "--sets", default=",".join(SETS), help=f"which sets to load, of {','.join(SETS)}"
    )
    parser.add_argument("--limit-scenes", type=int, help="only the first N FriendsQA scenes")
    parser.add_argument("--agents", type=int, default=3, help="agents the scenes spread over")
    parser.add_argument(
        "--one-channel",
        action="store_true",
        help="FriendsQA's scenes said one after another in one channel (a long conversation)",
    )
    parser.add_argument(
        "--json", nargs="?", const="-", metavar="PATH", help="also write the figures as JSON"
    )
    parser.add_argument("--reference-only", action="store_true", help="no Neo4j, BM25 only")
    parser.add_argument(
        "--held",
        action="store_true",
        help="hold each question to its answer's channel, as build_context asks in one",
    )
    parser.add_argument(
        "--embedder", choices=("minilm", "wordllama"), default="minilm", help="vector model"
    )
    parser.add_argument(
        "--no-context",
        action="store_true",
        help="embed each episode on its own (MEMSYNC_EMBED_CONTEXT=false)",
    )
    args = parser.parse_args(argv)
    started = time.perf_counter()
    root, note = data_root(args.data)
    if note:
        print(f"note: {note}", file=sys.stderr)
    wanted = set(args.sets.split(","))
    if unknown := wanted - set(SETS):
        parser.error(f"--sets: unknown {', '.join(sorted(unknown))} (known: {', '.join(SETS)})")
    builders: dict[str, Callable[[], Corpus]] = {
        "friends": lambda: friends_corpus(
            root, args.agents, args.limit_scenes, args.split, one_channel=args.one_channel
        ),
        "paraphrases": paraphrase_corpus,
        "customer": lambda: paraphrase_corpus(
            CUSTOMER_MEMORY, "customer memory (blind)", CUSTOMER_TENANT
        ),
        "customer-b": lambda: paraphrase_corpus(
            CUSTOMER_MEMORY_B, "customer memory B (blind)", CUSTOMER_B_TENANT
        ),
        "customer-c": lambda: paraphrase_corpus(
            CUSTOMER_MEMORY_C,
            "customer memory C (blind, held out)",
            CUSTOMER_C_TENANT,
            CUSTOMER_C_AGENT_SPEAKERS,
        ),
        "customer-d": lambda: paraphrase_corpus(
            CUSTOMER_MEMORY_D,
            "customer memory D (blind, held out)",
            CUSTOMER_D_TENANT,
            CUSTOMER_D_AGENT_SPEAKERS,
        ),
        "customer-e": lambda: paraphrase_corpus(
            CUSTOMER_MEMORY_E, "customer memory E (blind, held out)", CUSTOMER_E_TENANT
        ),
        "customer-f": lambda: paraphrase_corpus(
            CUSTOMER_MEMORY_F,
            "customer memory F (blind, held out)",
            CUSTOMER_F_TENANT,
            CUSTOMER_F_AGENT_SPEAKERS,
        ),
        "customer-g": lambda: paraphrase_corpus(
            CUSTOMER_MEMORY_G,
            "customer memory G (blind, design)",
            CUSTOMER_G_TENANT,
            CUSTOMER_G_AGENT_SPEAKERS,
        ),
        "customer-h": lambda: paraphrase_corpus(
            CUSTOMER_MEMORY_H,
            "customer memory H, a returning customer (blind, held out)",
            CUSTOMER_H_TENANT,
            speakers_ending(CUSTOMER_MEMORY_H, CUSTOMER_H_AGENT_SUFFIX),
        ),
        "customer-tau": lambda: tau_corpus(root),
        "long": lambda: long_corpus(args.split),
    }
    corpora = [builders[name]() for name in SETS if name in wanted]
    if note and "friends" in wanted:
        corpora[0].notes.append("vendored slice")
    loaded = [(corpus, sync_jobs(corpus)) for corpus in corpora]
    figures: dict[str, Any] = {"data": str(root), "corpora": {}}
    graphs = [] if args.reference_only else loaded
    with graph_side(graphs, args.embedder, not args.no_context) as side:
        for line in side.notes:
            print(f"note: {line}", file=sys.stderr)
        for corpus, jobs in loaded:
            rankers = reference_rankers(jobs)
            for mode in GRAPH_MODES:
                if f"{corpus.tenant}/{mode}" in side.rankers:
                    rankers[mode] = side.rankers[f"{corpus.tenant}/{mode}"]
            channels = answer_channels(corpus)
            held = channels if args.held else None
            results = {name: evaluate(corpus.cases, rank, held) for name, rank in rankers.items()}
            if f"{corpus.tenant}/{CONTEXT}" in side.rankers:
                results[CONTEXT] = evaluate(
                    corpus.cases, side.rankers[f"{corpus.tenant}/{CONTEXT}"], channels
                )
            figures["corpora"][corpus.name] = report(
                corpus, results, side.context_tokens.get(corpus.tenant, [])
            )
    timings = {**side.timings, "total": time.perf_counter() - started}
    figures["timings_s"] = {k: round(v, 2) for k, v in timings.items()}
    figures["notes"] = [*side.notes, *([note] if note else [])]
    print("\n" + "  ".join(f"{k} {v:.1f} s" for k, v in timings.items()))
    if args.json:
        text = json.dumps(figures, indent=2)
        if args.json == "-":
            print(text)
        else:
            Path(args.json).write_text(text + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
