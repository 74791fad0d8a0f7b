"""The peer of the whole-server benchmark: the OpenAI Agents SDK doing the same scenario on the same scripted server.

It runs in a virtualenv of its own (``.venv-peer``, made by ``make bench``: ``openai-agents`` 0.24
needs ``websockets<17``, the project pins 17.4), so it imports nothing of the project. A lead agent
(``OpenAIChatCompletionsModel`` over ``gpt-4.1``, tracing disabled) has two agents as tools
(``research_invoices``, ``research_meetings``, ``Agent.as_tool``); the scripted server
(``bench/scripted.py``) makes the lead call both at once, each agent (``gpt-4o-mini``, as the project's) then calls
``kb_search``, ``kb_read`` of the hits and ``submit_result`` (``StopAtTools``: its report is the
agent's output), and the lead answers: 8 model requests a run, as the project's scenario. No
persistence, nothing streamed to anyone: the peer's bare engine.

``python bench/peer.py --base-url URL`` prints ``{"ready": true}``, then runs one run for each line
``stream`` or ``json`` it reads (streamed with ``Runner.run_streamed``, or ``Runner.run``) and prints
a JSON line: the run's start and end (``time.monotonic()``, the clock of the scripted server's log)
and the CPU time the process took for it (``/proc/self/stat``, every thread). The benchmark
interleaves the peer's runs with the server's, so that a neighbour's load weighs on both alike.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import sys
import time
from typing import Any

from agents import Agent, ModelSettings, OpenAIChatCompletionsModel, Runner, function_tool, set_tracing_disabled
from agents.agent import StopAtTools
from openai import AsyncOpenAI

QUESTION = "Bimbamjob: invoices 2024, payments and the relationship. Conclude on the risk."
DOCUMENTS = {
    "factures-1": (
        "Invoice F-2024-031 — Bimbamjob",
        "Invoice F-2024-031 issued to Bimbamjob on 2024-02-05 for 18,400 EUR (annual platform licence). "
        "Due 2024-03-06. Paid on 2024-05-21, 76 days late, after two reminders.",
    ),
    "factures-2": (
        "Invoice F-2024-077 — Bimbamjob",
        "Invoice F-2024-077 issued to Bimbamjob on 2024-06-03 for 6,250 EUR (integration work, 25 days). "
        "Due 2024-07-03. Unpaid at 2024-12-31; a formal notice was sent on 2024-10-15.",
    ),
    "factures-3": (
        "Invoice F-2024-018 — Tamaris Conseil",
        "Invoice F-2024-018 issued to Tamaris Conseil on 2024-01-22 for 9,800 EUR (training, 4 sessions). "
        "Paid on 2024-02-12, on time.",
    ),
    "comptes-rendus-1": (
        "Meeting with Bimbamjob, June",
        "Meeting with Bimbamjob in June: they asked for a payment plan. The relationship is tense.",
    ),
    "comptes-rendus-2": (
        "Internal review, September",
        "Internal review: Bimbamjob's payment delays flagged to the finance team.",
    ),
}
WORD = re.compile(r"\w+")


def _words(text: str) -> set[str]:
    return {w.lower() for w in WORD.findall(text)}


@function_tool
def kb_search(query: str) -> str:
    """Search the knowledge base; returns the hits (id, title, snippet), best first."""
    words = _words(query)
    scored = sorted(
        ((len(words & _words(title + " " + text)), doc_id, title, text) for doc_id, (title, text) in DOCUMENTS.items()),
        reverse=True,
    )
    hits = [{"id": d, "title": t, "snippet": x[:120]} for score, d, t, x in scored if score > 0][:5]
    return json.dumps({"hits": hits}, ensure_ascii=False)


@function_tool
def kb_read(ids: list[str]) -> str:
    """Read documents by id; returns their whole text."""
    docs = [{"id": i, "title": DOCUMENTS[i][0], "text": DOCUMENTS[i][1]} for i in ids if i in DOCUMENTS]
    return json.dumps({"documents": docs}, ensure_ascii=False)


@function_tool
def submit_result(findings: str, sources: list[str], gaps: list[str]) -> str:
    """Submit the report: the findings with their document ids, the sources read, the gaps."""
    return json.dumps({"findings": findings, "sources": sources, "gaps": gaps}, ensure_ascii=False)


def lead(client: AsyncOpenAI) -> Agent[Any]:
    agent_model = OpenAIChatCompletionsModel(model="gpt-4o-mini", openai_client=client)
    settings = ModelSettings(include_usage=True)
    researchers = [
        Agent(
            name=name,
            instructions="You are a research agent. Search, read the hits, then call submit_result.",
            model=agent_model,
            model_settings=settings,
            tools=[kb_search, kb_read, submit_result],
            tool_use_behavior=StopAtTools(stop_at_tool_names=["submit_result"]),
        )
        for name in ("invoices", "meetings")
    ]
    return Agent(
        name="lead",
        instructions="Delegate the searches to the research agents, then answer with their findings.",
        model=OpenAIChatCompletionsModel(model="gpt-4.1", openai_client=client),
        model_settings=settings,
        tools=[
            a.as_tool(tool_name=f"research_{a.name}", tool_description=f"A research agent over the {a.name}.")
            for a in researchers
        ],
    )


async def one_run(agent: Agent[Any], stream: bool) -> str:
    if not stream:
        result = await Runner.run(agent, QUESTION)
        return str(result.final_output)
    streamed = Runner.run_streamed(agent, QUESTION)
    async for _event in streamed.stream_events():
        pass
    return str(streamed.final_output)


def cpu_seconds() -> float:
    """This process's user + system CPU time, every thread, from ``/proc/self/stat``."""
    with open("/proc/self/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base-url", required=True)
    args = parser.parse_args()
    set_tracing_disabled(True)
    client = AsyncOpenAI(base_url=args.base_url, api_key="sk-bench", max_retries=0)
    agent = lead(client)
    print(json.dumps({"ready": True}), flush=True)
    loop = asyncio.get_running_loop()
    while True:
        line = await loop.run_in_executor(None, sys.stdin.readline)
        if line.strip() not in ("stream", "json"):
            return
        cpu = cpu_seconds()
        started = time.monotonic()
        answer = await one_run(agent, line.strip() == "stream")
        end = time.monotonic()
        out = {"start": started, "end": end, "cpu": cpu_seconds() - cpu, "answer_chars": len(answer)}
        print(json.dumps(out), flush=True)


if __name__ == "__main__":
    asyncio.run(main())
