"""Sub-agents: the parent's context with exploration done inline against done in children,
and the cost of one delegation round trip.

What is measured
    isolation  Each tau-bench airline trajectory (``../shared/data/tau-bench-trajectories``:
               a GPT-4o agent's tool calls and their recorded results, a long policy prompt)
               is replayed through ``Engine.run_turn`` twice, on SQLite with the scripted
               model answering as the agent did, each tool returning its recorded output:
               inline    the agent makes every call itself, as recorded;
               delegated each run of read-only calls (lookups, searches, ``calculate``,
                         ``think``) becomes one ``delegate`` call; a child replays those calls
                         in its own conversation and answers with what the agent said next
                         (or, where it said nothing, the last lookup), cut to the agent's
                         ``result_tokens``. Calls that change something stay in the parent.
               Reported: the parent's context at its last call (prompt tokens), its mean
               over its calls, the total tokens of every call (parent and children, prompt
               and output), and the bill of every call under ``anthropic-5m`` ($3/M input,
               each call against its conversation's call before).
    research   A corpus task of our own with dead ends, on real text: the ShareGPT sample
               (``../shared/data/sharegpt-sample-1000``) as an archive searched with
               threadline's own corpus search (SQLite FTS5), one conversation per task to
               find from a phrase of its first message. The agent's moves are fixed in
               advance from the real search results: a broad search (the question's three
               longest words), read its top three hits, a search for the phrase (to confirm,
               or to look further), read its new hits in order until the right one (at most
               three), answer with its id and the start of its first reply. Inline, the
               parent makes those calls; delegated, one child does, and the parent answers
               with the child's answer. Reads return 4,000 characters, searches five
               400-character passages.
    overhead   One turn with one inline tool call, against one turn whose tool call is a
               delegation (a child conversation, its turn, its answer); each the first turn
               of a new conversation, scripted model, no delays, SQLite; the two alternate,
               each timed per turn.

    .venv/bin/python bench/delegation.py [--limit N] [--tasks N] [--overhead-turns N] [--json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from collections import defaultdict, deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from threadline.cache.pricing import profile
from threadline.cache.report import reuse_of
from threadline.engine import Engine
from threadline.items import canonical_json
from threadline.models.scripted import ScriptedModel, ToolCalls, scripted_tokens
from threadline.request import Request
from threadline.retrieval.corpus import Corpus, Document
from threadline.stores.sqlite import SQLiteStore
from threadline.turn.children import descendants
from threadline.turn.delegate import DELEGATE, Agent, Delegation
from threadline.turn.tools import Tool, ToolContext, ToolLimits

SHARED = Path(__file__).resolve().parents[1] / ".." / "shared" / "data"
DATA = SHARED / "tau-bench-trajectories" / "gpt-4o-airline.json"
SHAREGPT = SHARED / "sharegpt-sample-1000" / "sharegpt_sample_1000.jsonl"
ARCHIVIST = "You help people find conversations in the archive and say what was answered."
READ_ONLY = frozenset({"get_reservation_details", "get_user_details", "search_direct_flight",
                       "search_onestop_flight", "list_all_airports", "calculate", "think"})
RESEARCHER = ("You look things up for an airline agent: reservations, users, flights. Call "
              "the tools you need, then answer with what you found, briefly.")
ANY_ARGUMENTS = {"type": "object"}
RESULT_TOKENS = 200


def scripted_count(text: str) -> int:
    return len(scripted_tokens(text))


@dataclass
class Step:
    """One model call of the agent: its tool calls (name, arguments, recorded output) and
    its text."""

    text: str
    calls: list[tuple[str, dict[str, Any], str]] = field(default_factory=list)

    @property
    def read_only(self) -> bool:
        return bool(self.calls) and all(name in READ_ONLY for name, _, _ in self.calls)


@dataclass
class Turn:
    user: str
    steps: list[Step]


def trajectories(path: Path, limit: int | None) -> list[tuple[str, list[Turn]]]:
    out = []
    for record in json.loads(path.read_text("utf-8"))[:limit]:
        system, turns = "", []
        outputs: dict[str, str] = {}
        for message in record["traj"]:
            if message["role"] == "tool":
                outputs[message["tool_call_id"]] = message["content"] or ""
        for message in record["traj"]:
            role = message["role"]
            if role == "system":
                system = message["content"]
            elif role == "user":
                turns.append(Turn(message["content"] or " ", []))
            elif role == "assistant" and turns:
                calls = [(c["function"]["name"], json.loads(c["function"]["arguments"]),
                          outputs.get(c["id"], "")) for c in message.get("tool_calls") or []]
                turns[-1].steps.append(Step(message.get("content") or "", calls))
        out.append((system, [t for t in turns if t.steps]))
    return out


class Recorded:
    """Tools that return what the trajectory recorded for the same name and arguments."""

    def __init__(self) -> None:
        self.outputs: dict[tuple[str, str], deque[str]] = defaultdict(deque)

    def expect(self, name: str, arguments: Mapping[str, Any], output: str) -> None:
        self.outputs[(name, canonical_json(dict(arguments)))].append(output)

    def tool(self, name: str) -> Tool:
        def run(arguments: Mapping[str, Any], context: ToolContext) -> str:
            found = self.outputs[(name, canonical_json(dict(arguments)))]
            return found.popleft() if found else ""
        return Tool(name, f"The airline's {name} tool.", ANY_ARGUMENTS, run)


class Script:
    """The scripted agent's replies, one queue for the parent and one for its children,
    told apart by the system prompt."""

    def __init__(self) -> None:
        self.parent: deque[str | ToolCalls] = deque()
        self.child: deque[str | ToolCalls] = deque()

    def reply(self, request: Request) -> str | ToolCalls:
        system = request.messages[0].content if request.messages else ""
        queue = self.child if system == RESEARCHER else self.parent
        return queue.popleft() if queue else "(nothing scripted)"


def _calls(step: Step) -> ToolCalls:
    return ToolCalls(tuple((name, args) for name, args, _ in step.calls), step.text)


def script_inline(turn: Turn, script: Script, recorded: Recorded) -> None:
    for step in turn.steps:
        for name, args, output in step.calls:
            recorded.expect(name, args, output)
        script.parent.append(_calls(step) if step.calls else step.text)
    if turn.steps[-1].calls:
        script.parent.append("")  # the turn's last call: the loop asks once more


def script_delegated(turn: Turn, script: Script, recorded: Recorded) -> None:
    steps, i = turn.steps, 0
    while i < len(steps):
        if not steps[i].read_only:
            for name, args, output in steps[i].calls:
                recorded.expect(name, args, output)
            script.parent.append(_calls(steps[i]) if steps[i].calls else steps[i].text)
            i += 1
            continue
        episode = []
        while i < len(steps) and steps[i].read_only:
            episode.append(steps[i])
            i += 1
        for step in episode:
            for name, args, output in step.calls:
                recorded.expect(name, args, output)
            script.child.append(_calls(step))
        after = steps[i].text if i < len(steps) and steps[i].text else ""
        script.child.append(after or episode[-1].calls[-1][2] or "nothing found")
        task = f"For this request, look up what is needed: {turn.user}"
        script.parent.append(ToolCalls.of((DELEGATE, {"agent": "researcher", "task": task})))
    if turn.steps[-1].calls:
        script.parent.append("")


@dataclass
class Arm:
    conversations: int = 0
    parent_last: list[int] = field(default_factory=list)
    beyond_system: list[int] = field(default_factory=list)  # the last call less its system
    parent_mean: list[float] = field(default_factory=list)
    total_tokens: int = 0
    parent_calls: int = 0
    child_calls: int = 0
    children: int = 0
    cost_usd: float = 0.0
    seconds: float = 0.0

    def to_json(self) -> dict[str, Any]:
        return {"conversations": self.conversations,
                "parent_context_tokens_last": sum(self.parent_last),
                "parent_context_tokens_last_beyond_system": sum(self.beyond_system),
                "parent_context_tokens_mean_per_call": round(statistics.fmean(self.parent_mean),
                                                             1),
                "total_tokens": self.total_tokens, "parent_calls": self.parent_calls,
                "child_calls": self.child_calls, "children": self.children,
                "cost_usd": round(self.cost_usd, 4), "seconds": round(self.seconds, 2)}


def isolation(runs: Sequence[tuple[str, list[Turn]]], delegated: bool, folder: Path) -> Arm:
    arm = Arm()
    pricing = profile("anthropic-5m")
    started = time.perf_counter()
    store = SQLiteStore(folder / ("delegated.db" if delegated else "inline.db"))
    for system, turns in runs:
        script, recorded = Script(), Recorded()
        names = sorted({name for t in turns for s in t.steps for name, _, _ in s.calls})
        reads = [recorded.tool(n) for n in names if n in READ_ONLY]
        writes = [recorded.tool(n) for n in names if n not in READ_ONLY]
        model = ScriptedModel(default=script.reply)
        if delegated:
            agent = Agent("researcher", "Looks up reservations, users and flights.",
                          RESEARCHER, tools=reads, limits=ToolLimits(max_rounds=64),
                          result_tokens=RESULT_TOKENS)
            engine = Engine(store, model, system=system, tools=writes, agents=[agent],
                            delegation=Delegation(max_fanout=32),
                            tool_limits=ToolLimits(max_rounds=64))
        else:
            engine = Engine(store, model, system=system, tools=[*reads, *writes],
                            tool_limits=ToolLimits(max_rounds=64))
        cid = None
        for turn in turns:
            (script_delegated if delegated else script_inline)(turn, script, recorded)
            cid = engine.run_turn(turn.user, conversation_id=cid).conversation_id
        assert cid is not None
        _account(arm, store, cid, pricing)
    arm.seconds = time.perf_counter() - started
    store.close()
    return arm


def _archive(limit: int) -> tuple[dict[str, str], list[tuple[str, str, str]]]:
    """The archive (id → text) and the tasks: (target id, question, answer)."""
    texts, tasks = {}, []
    for line in SHAREGPT.read_text("utf-8").splitlines():
        record = json.loads(line)
        turns = record["conversations"]
        text = "\n".join(f"{t['from']}: {t['value']}" for t in turns)
        texts[record["id"]] = text[:8000]
        first = next((t["value"] for t in turns if t["from"] == "human"), "")
        reply = next((t["value"] for t in turns if t["from"] == "gpt"), "")
        words = first.split()
        if len(words) >= 12 and reply and len(tasks) < limit and len(texts) % 7 == 0:
            tasks.append((record["id"], " ".join(words[:15]),
                          f"{record['id']}: {' '.join(reply.split()[:60])}"))
    return texts, tasks


def _moves(corpus: Corpus, target: str, question: str) -> list[tuple[str, dict[str, Any]]]:
    """The agent's calls for one task, fixed from what the searches really return."""
    broad = " ".join(sorted(question.split(), key=len, reverse=True)[:3])
    moves: list[tuple[str, dict[str, Any]]] = [("search", {"query": broad})]
    first = _sources(corpus, broad)[:3]
    moves += [("read", {"id": s}) for s in first]
    moves.append(("search", {"query": question}))  # to confirm, or to look further
    for source in [s for s in _sources(corpus, question) if s not in first][:3]:
        if target in first:
            break
        moves.append(("read", {"id": source}))
        if source == target:
            break
    return moves


def _sources(corpus: Corpus, query: str) -> list[str]:
    seen: list[str] = []
    for passage in corpus.search("archive", query, limit=5):
        if passage.source not in seen:
            seen.append(passage.source)
    return seen


def _tiny_runs() -> list[tuple[str, list[Turn]]]:
    """Two trajectories in tau-bench's shape, for the smoke test."""
    lookup = [("get_user_details", {"user_id": "u1"}, "user u1: " + "detail " * 60),
              ("get_reservation_details", {"reservation_id": "R1"}, "R1: " + "leg " * 80)]
    turns = [Turn("Change my flight.", [Step("", lookup[:1]), Step("", lookup[1:]),
                                        Step("Which date?")]),
             Turn("The 20th.", [Step("", [("update_reservation_flights", {"id": "R1"},
                                           "done")]), Step("Changed.")])]
    return [("Airline policy. " * 40, turns), ("Airline policy. " * 40, turns[:1])]


def _tiny_archive() -> tuple[dict[str, str], list[tuple[str, str, str]]]:
    texts = {f"d{n}": f"human: question {n} about topic {n % 3} and the weather\ngpt: answer "
             f"{n} " + "more words " * 50 for n in range(12)}
    return texts, [("d4", "question 4 about topic 1", "d4: answer 4"),
                   ("d7", "question 7 about topic 1", "d7: answer 7")]


def research(archive: tuple[dict[str, str], list[tuple[str, str, str]]],
             folder: Path) -> dict[str, Any]:
    texts, chosen = archive
    inline = _research_arm(False, texts, chosen, folder)
    delegated = _research_arm(True, texts, chosen, folder)
    store = SQLiteStore(folder / "research-False.db")  # what the agent's moves were
    corpus = Corpus(store)
    moves = [(target, _moves(corpus, target, question)) for target, question, _ in chosen]
    store.close()
    reads = [(target, m[1]["id"]) for target, found in moves for m in found if m[0] == "read"]
    return {"tasks": len(chosen),
            "searches": sum(m[0] == "search" for _, found in moves for m in found),
            "reads": len(reads), "dead_end_reads": sum(t != r for t, r in reads),
            "found": sum(any(r == t for t2, r in reads if t2 == t) for t, _ in moves),
            "inline": inline.to_json(), "delegated": delegated.to_json(),
            "parent_context_ratio_last": round(sum(delegated.parent_last) /
                                               sum(inline.parent_last), 3),
            "total_token_multiplier": round(delegated.total_tokens / inline.total_tokens, 3),
            "cost_multiplier": round(delegated.cost_usd / inline.cost_usd, 3)}


def _research_arm(delegated: bool, texts: Mapping[str, str],
                  chosen: Sequence[tuple[str, str, str]], folder: Path) -> Arm:
    store = SQLiteStore(folder / f"research-{delegated}.db")
    corpus = Corpus(store)
    corpus.add("archive", [Document(source, text) for source, text in texts.items()])

    def search(arguments: Mapping[str, Any], context: ToolContext) -> str:
        return json.dumps([{"id": p.source, "text": p.text[:400]} for p in
                           corpus.search("archive", str(arguments["query"]), limit=5)])

    def read(arguments: Mapping[str, Any], context: ToolContext) -> str:
        return texts.get(str(arguments["id"]), "no such conversation")[:4000]

    tools = [Tool("search", "Search the archive.", ANY_ARGUMENTS, search),
             Tool("read", "Read one conversation of the archive.", ANY_ARGUMENTS, read)]
    script = Script()
    model = ScriptedModel(default=script.reply)
    if delegated:
        agent = Agent("researcher", "Searches and reads the archive.", RESEARCHER, tools=tools,
                      limits=ToolLimits(max_rounds=16), result_tokens=RESULT_TOKENS)
        engine = Engine(store, model, system=ARCHIVIST, agents=[agent],
                        delegation=Delegation())
    else:
        engine = Engine(store, model, system=ARCHIVIST, tools=tools,
                        tool_limits=ToolLimits(max_rounds=16))
    arm, pricing = Arm(), profile("anthropic-5m")
    started = time.perf_counter()
    for target, question, answer in chosen:
        ask = f"Find the conversation where someone asked: \"{question}\". What was " \
              "answered first?"
        moves = [ToolCalls.of(move) for move in _moves(corpus, target, question)]
        if delegated:
            script.parent.append(ToolCalls.of((DELEGATE, {"agent": "researcher",
                                                          "task": ask})))
            script.child.extend([*moves, answer])
        else:
            script.parent.extend(moves)
        script.parent.append(answer)
        _account(arm, store, engine.run_turn(ask).conversation_id, pricing)
    arm.seconds = time.perf_counter() - started
    store.close()
    return arm


def _account(arm: Arm, store: SQLiteStore, cid: str, pricing: Any) -> None:
    own = store.calls(cid)
    children = descendants(store, cid)
    below = [c for child in children for c in store.calls(child)]
    arm.conversations += 1
    arm.parent_last.append(own[-1].usage.prompt_tokens)
    system = store.conversation(cid).system or ""
    arm.beyond_system.append(own[-1].usage.prompt_tokens - scripted_count(system))
    arm.parent_mean.append(statistics.fmean(c.usage.prompt_tokens for c in own))
    arm.parent_calls += len(own)
    arm.child_calls += len(below)
    arm.children += len(children)
    arm.total_tokens += sum(c.usage.prompt_tokens + c.usage.completion_tokens
                            for c in (*own, *below))
    arm.cost_usd += sum(r.cost_usd for r in reuse_of(own, pricing, 3.0))
    for child in children:
        arm.cost_usd += sum(r.cost_usd for r in reuse_of(store.calls(child), pricing, 3.0))


def overhead(turns: int, folder: Path) -> dict[str, Any]:
    """Per-turn time of a turn with one inline tool call against one with a delegation, each
    the first turn of a new conversation (so neither grows), the two alternating."""
    lookup = Tool("lookup", "Look a thing up.", ANY_ARGUMENTS, lambda a, c: "found: 42")
    agent = Agent("researcher", "Looks things up.", RESEARCHER, tools=[lookup])

    def reply(request: Request) -> str | ToolCalls:
        if request.messages[0].content == RESEARCHER:
            return "found: 42"
        if request.messages[-1].role == "tool":
            return "The answer is 42."
        if request.messages[0].content == "delegating":
            return ToolCalls.of((DELEGATE, {"agent": "researcher", "task": "look it up"}))
        return ToolCalls.of(("lookup", {"q": "it"}))

    model = ScriptedModel(default=reply)
    store = SQLiteStore(folder / "overhead.db")
    engines = {"inline": Engine(store, model, system="inline", tools=[lookup]),
               "delegated": Engine(store, model, system="delegating", agents=[agent],
                                   delegation=Delegation())}
    times: dict[str, list[float]] = {"inline": [], "delegated": []}
    for n in range(2 * turns + 20):
        name = "inline" if n % 2 == 0 else "delegated"
        started = time.perf_counter()
        engines[name].run_turn(f"question {n}")
        if n >= 20:  # the first rounds warm the caches
            times[name].append((time.perf_counter() - started) * 1000)
    store.close()
    p50 = {k: statistics.median(v) for k, v in times.items()}
    return {"turns_each": turns, "inline_p50_ms": round(p50["inline"], 3),
            "delegated_p50_ms": round(p50["delegated"], 3),
            "ratio": round(p50["delegated"] / p50["inline"], 3)}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--limit", type=int, default=None, help="Trajectories (all: 200).")
    parser.add_argument("--tasks", type=int, default=40, help="Research tasks.")
    parser.add_argument("--overhead-turns", type=int, default=200)
    parser.add_argument("--quick", action="store_true",
                        help="built-in samples, 20 turns: a smoke test")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    if args.quick:  # built-in samples: the smoke test runs where the shared data is not
        args.overhead_turns = 20
        runs, archive = _tiny_runs(), _tiny_archive()
    else:
        for path in (DATA, SHAREGPT):
            if not path.exists():
                print(f"the benchmark's data is not at {path}", file=sys.stderr)
                return 2
        runs, archive = trajectories(DATA, args.limit), _archive(args.tasks)
    with tempfile.TemporaryDirectory() as folder:
        inline = isolation(runs, False, Path(folder))
        delegated = isolation(runs, True, Path(folder))
        searching = research(archive, Path(folder))
        cost = overhead(args.overhead_turns, Path(folder))
    result = {
        "benchmark": "delegation",
        "data": "built-in samples" if args.quick else "tau-bench airline, gpt-4o "
                "trajectories; the ShareGPT sample as an archive", "trajectories": len(runs),
        "inline": inline.to_json(), "delegated": delegated.to_json(),
        "parent_context_ratio_last": round(sum(delegated.parent_last) / sum(inline.parent_last),
                                           3),
        "parent_context_ratio_mean": round(statistics.fmean(delegated.parent_mean) /
                                           statistics.fmean(inline.parent_mean), 3),
        "parent_context_ratio_last_beyond_system": round(
            sum(delegated.beyond_system) / sum(inline.beyond_system), 3),
        "total_token_multiplier": round(delegated.total_tokens / inline.total_tokens, 3),
        "cost_multiplier": round(delegated.cost_usd / inline.cost_usd, 3),
        "research": searching, "overhead": cost}
    if args.json:
        print(json.dumps(result, indent=2))
        return 0
    for name in ("inline", "delegated"):
        arm = result[name]
        print(f"{name:>9}: parent context at its last call {arm['parent_context_tokens_last']:,}"
              f" tokens (mean per call {arm['parent_context_tokens_mean_per_call']:,}), total "
              f"{arm['total_tokens']:,} tokens over {arm['parent_calls']} parent and "
              f"{arm['child_calls']} child calls, ${arm['cost_usd']:.2f}")
    print(f"parent context, delegated ÷ inline: {result['parent_context_ratio_last']} at the "
          f"last call ({result['parent_context_ratio_last_beyond_system']} beyond the system "
          f"prompt), {result['parent_context_ratio_mean']} per call; total tokens "
          f"×{result['total_token_multiplier']}, cost ×{result['cost_multiplier']}")
    print(f"research ({searching['tasks']} tasks, {searching['searches']} searches, "
          f"{searching['reads']} reads of which {searching['dead_end_reads']} dead ends, "
          f"{searching['found']} found): parent context delegated ÷ inline "
          f"{searching['parent_context_ratio_last']} at its last call "
          f"({searching['delegated']['parent_context_tokens_last']:,} against "
          f"{searching['inline']['parent_context_tokens_last']:,}); total tokens "
          f"×{searching['total_token_multiplier']}, cost ×{searching['cost_multiplier']}")
    print(f"one turn, p50: inline tool call {cost['inline_p50_ms']} ms, delegation "
          f"{cost['delegated_p50_ms']} ms: ×{cost['ratio']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
