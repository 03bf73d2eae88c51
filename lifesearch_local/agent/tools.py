"""The agent's tools behind one protocol; web_search and web_fetch over the local web layer, cutoff by the harness."""

from __future__ import annotations

from typing import Any, Protocol

from lifesearch_local.agent.config import AgentConfig, ToolsConfig
from lifesearch_local.agent.observation import Observation, clip
from lifesearch_local.records import Task
from lifesearch_local.web.config import WebConfig

# name -> "module:class"; each class is built as cls(tool settings, web handles) by `build_tools`.
TOOLS = ("web_search", "web_fetch", "python")


class Tool(Protocol):
    """A tool the model can call: an OpenAI function schema and one verb."""

    name: str
    schema: dict[str, Any]

    async def run(self, arguments: dict[str, Any], task: Task) -> Observation:
        """Execute one call for `task` (whose cutoff the tool enforces, whatever the model asks)."""
        ...


def _function(name: str, description: str, props: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {"type": "function", "function": {"name": name, "description": description,
                                             "parameters": {"type": "object", "properties": props, "required": required}}}


class WebHandles:
    """The web layer's fetcher and searcher for one agent phase, shared by all its tasks (and their counters)."""

    def __init__(self, config: WebConfig, *, offline: bool = False, fetcher: Any = None, searcher: Any = None):
        from lifesearch_local.web.fetcher import Fetcher
        from lifesearch_local.web.search import Searcher

        self.config = config
        self.fetcher = fetcher or Fetcher(config, **(_offline_network() if offline else {}))
        self.searcher = searcher or Searcher(config)

    async def aclose(self) -> None:
        await self.fetcher.aclose()

    def stats(self) -> dict[str, Any]:
        """Pages fetched (live/archive), served from the corpus or the cache, failures; searches run."""
        return {"fetch": self.fetcher.stats.model_dump(), "searches_run": getattr(self.searcher, "searches", None)}


def _offline_network() -> dict[str, Any]:
    """A resolver that knows no name and a socket layer that refuses every connection."""
    import httpcore

    from lifesearch_local.web.ssrf import StaticResolver

    class NoNetwork(httpcore.AsyncNetworkBackend):
        async def connect_tcp(self, host, port, timeout=None, local_address=None, socket_options=None):
            raise httpcore.ConnectError(f"offline: no connection to {host}:{port}")

        async def connect_unix_socket(self, path, timeout=None, socket_options=None):
            raise httpcore.ConnectError("offline")

        async def sleep(self, seconds: float) -> None:
            import asyncio

            await asyncio.sleep(seconds)

    return {"resolver": StaticResolver({}), "connector": NoNetwork()}


class WebSearchTool:
    """Search results (title, link, date, snippet); none dated after the task's cutoff."""

    name = "web_search"

    def __init__(self, settings: ToolsConfig, web: WebHandles):
        self.settings, self.web = settings, web
        self.schema = _function(
            "web_search", "Search the web. Returns titles, links, dates and snippets of the top results.",
            {"query": {"type": "string", "description": "search query"},
             "num": {"type": "integer", "description": f"number of results (1-{settings.search_results})"}},
            ["query"],
        )

    async def run(self, arguments: dict[str, Any], task: Task) -> Observation:
        from lifesearch_local.web.cache import CacheCorrupt, ReplayMiss
        from lifesearch_local.web.search import SearchError

        query = str(arguments["query"])
        num = max(1, min(int(arguments.get("num") or self.settings.search_results), self.settings.search_results))
        try:
            results = await self.web.searcher.search(query, num=num, as_of=task.as_of)
        except ReplayMiss as e:
            return Observation.fail("replay_miss", str(e), query=query)
        except CacheCorrupt as e:
            return Observation.fail("cache_corrupt", str(e), query=query)
        except SearchError as e:
            return Observation.fail("search_error", str(e), query=query)
        lines = [f"{r.position}. {r.title}" + (f" ({r.date})" if r.date else "") + f"\n   {r.link}\n   {r.snippet}"
                 for r in results]
        text = "\n".join(lines) if lines else f"No results for {query!r}."
        return Observation(text=clip(text, self.settings.max_observation_chars), summary=f"{len(results)} results for {query!r}",
                           data={"query": query, "results": len(results), "links": [r.link for r in results]})


class WebFetchTool:
    """A page as markdown; with a cutoff, the last capture at or before it (the corpus refuses later pages)."""

    name = "web_fetch"

    def __init__(self, settings: ToolsConfig, web: WebHandles):
        self.settings, self.web = settings, web
        self.schema = _function(
            "web_fetch", "Fetch a web page (HTML or PDF) and return its main text as markdown.",
            {"url": {"type": "string", "description": "http(s) URL"}}, ["url"],
        )

    async def run(self, arguments: dict[str, Any], task: Task) -> Observation:
        from lifesearch_local.web.cache import ReplayMiss

        url = str(arguments["url"])
        try:
            result = await self.web.fetcher.fetch(url, as_of=task.as_of)
        except ReplayMiss as e:
            return Observation.fail("replay_miss", str(e), url=url)
        if not result.ok:
            return Observation(text=result.render(), ok=False, failure=result.kind, summary=f"{result.kind}: {result.message}"[:300],
                               data={"url": url, "status": result.status, "from_cache": result.from_cache})
        text = result.render()
        data = {"url": url, "final_url": result.final_url, "source": result.source, "from_cache": result.from_cache,
                "date": result.date, "chars": len(result.text), "content_type": result.content_type}
        return Observation(text=clip(text, self.settings.max_observation_chars), data=data,
                           summary=f"{result.source}{' (cache)' if result.from_cache else ''} {result.content_type}, "
                           f"{len(result.text)} chars, dated {result.date or '?'}")


def build_tools(cfg: AgentConfig, web: WebHandles | None) -> dict[str, Tool]:
    """The enabled tools, by name; web tools need `web`."""
    out: dict[str, Tool] = {}
    for name in cfg.tools.enabled:
        if name not in TOOLS:
            from lifesearch_local.errors import LifesearchError

            raise LifesearchError(f"agent {cfg.id}: unknown tool {name!r}; known: {', '.join(TOOLS)}")
        out[name] = _tool(name, cfg, web)
    return out


def _tool(name: str, cfg: AgentConfig, web: WebHandles | None) -> Tool:
    if name == "web_search":
        return WebSearchTool(cfg.tools, web)
    if name == "web_fetch":
        return WebFetchTool(cfg.tools, web)
    from lifesearch_local.agent.python_tool import (
        PythonTool,  # the sandbox runner: only for agents that use it
    )

    return PythonTool(cfg.tools, web)


def check_arguments(schema: dict[str, Any], arguments: Any) -> str | None:
    """Why `arguments` do not fit the tool's JSON schema (required keys, simple types), or None."""
    if not isinstance(arguments, dict):
        return f"arguments must be a JSON object, got {type(arguments).__name__}"
    params = schema["function"]["parameters"]
    missing = [k for k in params.get("required", []) if k not in arguments]
    if missing:
        return f"missing required argument(s): {', '.join(missing)}"
    types = {"string": str, "integer": int, "number": (int, float), "boolean": bool, "object": dict, "array": list}
    for key, value in arguments.items():
        want = params["properties"].get(key, {}).get("type")
        if key not in params["properties"]:
            return f"unknown argument {key!r}; expected {', '.join(params['properties'])}"
        if want in types and not isinstance(value, types[want]) and not (want == "integer" and _intlike(value)):
            return f"argument {key!r} must be a {want}"
    return None


def _intlike(value: Any) -> bool:
    return isinstance(value, str) and value.strip().isdigit()
