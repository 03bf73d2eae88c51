"""The ReAct loop of one task: decide, run the decision's tool calls concurrently, observe, until an answer or a budget."""

from __future__ import annotations

import asyncio
import datetime as dt
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from lifesearch_local.agent.clarify import is_clarification
from lifesearch_local.agent.config import AgentConfig
from lifesearch_local.agent.context import Context
from lifesearch_local.agent.observation import Observation
from lifesearch_local.agent.toolcalls import Decision, ToolCall, parse_decision
from lifesearch_local.agent.tools import Tool
from lifesearch_local.agent.trajectory import TrajectoryLog, call_record, error_record
from lifesearch_local.errors import DiskFull
from lifesearch_local.llm.prompts import render
from lifesearch_local.records import Report, ReportStatus, Task
from serving import ChatRequest, EndpointError, Generation, RetryPolicy, aretry, redact, redact_obj

Generate = Callable[[ChatRequest], Awaitable[Generation]]
# Errors of the code, not of the task or the engine's moment: raised out of the stage, never kept as a report.
BUGS = (TypeError, AttributeError, NameError, LookupError, AssertionError, NotImplementedError)
OnStep = Callable[[int], None]  # called with the output tokens of each model decision


def prompt_date(task: Task, today: dt.date | None = None) -> dt.date:
    """The agent's 'today': the task's cutoff when it has one (paper §4.4, temporal scope)."""
    return task.as_of or today or dt.date.today()


def system_prompt(task: Task, today: dt.date | None = None) -> tuple[str, str]:
    """The paper's agent system prompt (appendix B.6) with its date filled in. Returns (text, hash)."""
    return render("agent_system", today_date=prompt_date(task, today).isoformat())


@dataclass
class _Run:
    """Counters of one task run."""

    t0: float = field(default_factory=time.monotonic)
    output_tokens: int = 0
    prompt_tokens: int = 0
    tool_calls: int = 0
    pages_read: int = 0

    def elapsed(self) -> float:
        return time.monotonic() - self.t0


async def run_task(task: Task, run: int, cfg: AgentConfig, generate: Generate, tools: Mapping[str, Tool],
                   log: TrajectoryLog, *, stop: Any = None, on_step: OnStep | None = None,
                   today: dt.date | None = None) -> Report | None:
    """Run one task to a Report; None if `stop` was set first (the run is unfinished and will restart)."""
    if stop:  # never started: leave no trace
        return None
    system, digest = system_prompt(task, today)
    ctx = Context(system, task.question, [t.schema for t in tools.values()], cfg.tools.truncated_observation_chars)
    state = _Run()
    log.reset()
    log.write(_start_record(task, run, cfg, list(tools), digest, prompt_date(task, today)))
    for it in range(1, cfg.max_iterations + 1):
        if stop:
            log.write({"type": "stopped", "step": it, "t_s": round(state.elapsed(), 3)})
            return None
        limit, cut = _budget(ctx, cfg, it, state)
        record: dict[str, Any] = {"type": "step", "step": it, "t_s": round(state.elapsed(), 3), "forced_final": limit,
                                  "truncated_results": cut}
        request = _request(ctx, cfg, run, limit, record)
        try:
            gen = await _decide(generate, request, cfg, record, state, ctx)
        except Exception as e:  # the engine failed for good (see _decide): this run ends in error
            if isinstance(e, BUGS) or isinstance(e, EndpointError) and e.config_error:  # every task would fail
                raise  # alike (a bug, a wrong key/URL/model): stop, so the rerun after the fix redoes them
            if stop:  # stopping (e.g. `scontrol requeue` took the engine's Ray nodes down with us):
                log.write(record | {"type": "stopped", "error": f"{type(e).__name__}: {e}"})
                return None  # not the task's failure: no report, the rerun restarts it
            log.write(record | {"error": f"{type(e).__name__}: {e}"})
            return _finish(task, run, cfg, log, state, it, "", "error", f"model call failed: {type(e).__name__}: {e}")
        if on_step:
            on_step(gen.output_tokens)
        decision = parse_decision(gen, tools, it)
        if limit or decision.is_final or gen.finish_reason == "error":
            log.write(record)
            return _final(task, run, cfg, log, state, it, decision, gen, limit)
        record["calls"] = await _act(ctx, decision, tools, task, cfg, state)
        record["call_errors"] = [error_record(e) for e in decision.errors]
        log.write(record)
    raise AssertionError("unreachable: the last iteration always forces a final answer")


def _start_record(task: Task, run: int, cfg: AgentConfig, tools: list[str], digest: str, date: dt.date) -> dict[str, Any]:
    return {"type": "start", "task_id": task.id, "agent": cfg.id, "run": run,
            "as_of": task.as_of.isoformat() if task.as_of else None, "today_date": date.isoformat(),
            "prompt_hash": digest, "model": cfg.model.model, "tools": tools, "max_iterations": cfg.max_iterations,
            "context_tokens": cfg.context_tokens, "max_tokens": cfg.max_tokens, "wall_s": cfg.wall_s}


def _budget(ctx: Context, cfg: AgentConfig, it: int, state: _Run) -> tuple[str | None, int]:
    """Which limit (if any) forces this decision to be the final answer; tool results cut to fit."""
    limit = "iteration" if it == cfg.max_iterations else "wall-clock" if state.elapsed() >= cfg.wall_s else None
    room = cfg.context_tokens - cfg.max_tokens
    fits, cut = ctx.fit(room, ctx.final_prompt(limit) if limit else "")
    if not fits and limit is None:
        limit = "context"
        _, more = ctx.fit(room, ctx.final_prompt(limit))
        cut += more
    return limit, cut


def _request(ctx: Context, cfg: AgentConfig, run: int, limit: str | None, record: dict[str, Any]) -> ChatRequest:
    messages = ctx.request_messages(limit)
    record["input"] = {"messages": len(messages), "chars": sum(len(m.get("content") or "") for m in messages),
                       "tokens_est": ctx.estimate(ctx.final_prompt(limit) if limit else "")}
    return ChatRequest(messages=messages, max_tokens=cfg.max_tokens, temperature=cfg.temperature, top_p=cfg.top_p,
                       seed=cfg.seed + run, tools=ctx.tool_schemas or None)


async def _decide(generate: Generate, request: ChatRequest, cfg: AgentConfig, record: dict[str, Any], state: _Run,
                  ctx: Context) -> Generation:
    t = time.monotonic()
    # Only what can pass on another attempt (serving._util.retry.transient: a timeout, a lost connection,
    # a 429/5xx) is retried; a bug or a prompt over the context fails at once with its message.
    policy = RetryPolicy(attempts=cfg.model_retries + 1, base_delay=1.0, max_delay=20.0)
    gen = await aretry(lambda: generate(request), policy)
    state.output_tokens += gen.output_tokens
    state.prompt_tokens += gen.prompt_tokens
    record["input"]["prompt_tokens"] = gen.prompt_tokens
    if gen.truncated_tokens:  # the engine elided the longest message to fit the model's context
        record["input"]["truncated_tokens"] = gen.truncated_tokens
    ctx.calibrate(gen.prompt_tokens, record["input"]["tokens_est"], gen.truncated_tokens)
    record["model_s"] = round(time.monotonic() - t, 4)
    record["output"] = {"text": gen.text, "tokens": gen.output_tokens, "finish": gen.finish_reason,
                        **({"native_tool_calls": gen.tool_calls} if gen.tool_calls else {})}
    return gen


async def _act(ctx: Context, decision: Decision, tools: Mapping[str, Tool], task: Task, cfg: AgentConfig,
               state: _Run) -> list[dict[str, Any]]:
    """Run the decision's calls concurrently; add the decision, the results and any call errors to the context."""
    timeout = max(1.0, min(cfg.tools.timeout_s, cfg.wall_s - state.elapsed()))
    done = await asyncio.gather(*(_call(tools[c.name], c, task, timeout) for c in decision.calls))
    state.tool_calls += len(decision.calls)
    state.pages_read += sum(1 for c, (obs, _, _) in zip(decision.calls, done) if c.name == "web_fetch" and obs.ok)
    ctx.add_decision(decision)
    ctx.add_results(decision.calls, [obs for obs, _, _ in done])
    ctx.add_errors(decision.errors)
    return [call_record(c, obs, s - state.t0, e - state.t0) for c, (obs, s, e) in zip(decision.calls, done)]


async def _call(tool: Tool, call: ToolCall, task: Task, timeout: float) -> tuple[Observation, float, float]:
    """One call with a timeout; any failure becomes an observation. Returns (observation, start, end) times."""
    start = time.monotonic()
    try:
        obs = await asyncio.wait_for(tool.run(call.arguments, task), timeout)
    except asyncio.TimeoutError:
        obs = Observation.fail("timeout", f"{call.name} did not finish within {timeout:g} s")
    except DiskFull:  # not the tool's failure: no record of this run could be written either
        raise
    except Exception as e:  # a tool bug must not end the run: the model sees it and moves on
        obs = Observation.fail("tool_error", f"{call.name} failed: {type(e).__name__}: {e}")
    # A page or an error body may echo a configured key: neither the model nor the log may see it.
    obs.text, obs.summary, obs.data = redact(obs.text), redact(obs.summary), redact_obj(obs.data)
    return obs, start, time.monotonic()


def _final(task: Task, run: int, cfg: AgentConfig, log: TrajectoryLog, state: _Run, it: int, decision: Decision,
           gen: Generation, limit: str | None) -> Report:
    if gen.finish_reason == "error":
        return _finish(task, run, cfg, log, state, it, decision.content, "error", f"engine error: {gen.text[:300]}")
    if limit:
        return _finish(task, run, cfg, log, state, it, decision.content, "budget",
                       f"{limit} budget reached at iteration {it}; final answer forced")
    if gen.finish_reason == "length":  # a report cut by the token limit is not a finished one
        return _finish(task, run, cfg, log, state, it, decision.content, "budget",
                       f"answer cut at max_tokens ({cfg.max_tokens}) at iteration {it}")
    status: ReportStatus = "clarification" if is_clarification(decision.content) else "completed"
    return _finish(task, run, cfg, log, state, it, decision.content, status, None)


def _finish(task: Task, run: int, cfg: AgentConfig, log: TrajectoryLog, state: _Run, it: int, text: str,
            status: ReportStatus, error: str | None) -> Report:
    wall = round(state.elapsed(), 3)
    log.write({"type": "end", "status": status, "iterations": it, "output_tokens": state.output_tokens,
               "prompt_tokens": state.prompt_tokens, "tool_calls": state.tool_calls, "pages_read": state.pages_read,
               "wall_s": wall, "error": error})
    return Report(task_id=task.id, agent=cfg.id, run=run, text=text, status=status, iterations=it,
                  output_tokens=state.output_tokens, tool_calls=state.tool_calls, pages_read=state.pages_read,
                  wall_s=wall, trajectory=log.rel, error=error)
