"""The viewer's pages: the sources, a source's leaderboard, the decisions table and the diff of two judges.

Every string from a file goes through `markup.e`; every link is built from ids with `quote`/`urlencode`.
The pages hold no script: filters are a GET form, pages are links.
"""

from __future__ import annotations

from collections.abc import Sequence
from urllib.parse import quote, urlencode

import numpy as np

from lifesearch_local.output.numbers import fmt_p, mean_ci, mean_pm_std, signed_ci
from lifesearch_local.output.report.markup import e, table
from lifesearch_local.output.view.index import DecisionIndex
from lifesearch_local.output.view.query import AGREEMENT, SORTS, TRUNCATED, VERDICTS, DiffRow, Page, Query
from lifesearch_local.output.view.sources import Source

CSS = """
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,"Noto Sans","Noto Sans CJK SC","WenQuanYi Zen Hei",sans-serif;
 margin:0;color:#1d2430;background:#f6f7f9}
header{background:#1d2430;color:#fff;padding:8px 24px}header a{color:#cfe0ff;margin-right:14px}
main{max-width:1320px;margin:0 auto;padding:12px 24px 48px}
h1{font-size:20px;margin:8px 0 4px;overflow-wrap:anywhere}h2{font-size:17px;margin:24px 0 8px;border-bottom:1px solid #d8dde5}
.muted{color:#667085}.warn{background:#fffaeb;border:1px solid #f79009;border-radius:6px;padding:6px 10px;color:#93370d}
table{border-collapse:collapse;background:#fff;margin:6px 0 12px;font-size:13px}
th,td{border:1px solid #d8dde5;padding:3px 7px;vertical-align:top}th{background:#eef1f5;text-align:left}
td.num{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}th.num{text-align:right}
.wide{max-width:100%;overflow-x:auto}td{overflow-wrap:anywhere}td.reason{max-width:420px;color:#475467}
.yes{color:#067647;font-weight:600}.no{color:#b42318;font-weight:600}.ung{color:#b54708;font-weight:600}
form.filters{display:flex;flex-wrap:wrap;gap:6px 12px;align-items:end;background:#fff;border:1px solid #d8dde5;
 border-radius:6px;padding:8px 10px}form.filters label{display:flex;flex-direction:column;font-size:12px;color:#475467}
select,input{font:inherit;font-size:13px;padding:2px 4px;max-width:220px}form.pair select{max-width:480px}button{font:inherit;padding:3px 12px}
.pager a,.pager span{margin-right:10px}.cards{display:flex;flex-wrap:wrap;gap:8px;margin:10px 0}
.card{background:#fff;border:1px solid #d8dde5;border-radius:6px;padding:6px 12px}.card b{display:block;font-size:18px}
pre{white-space:pre-wrap;word-break:break-word;background:#fff;border:1px solid #d8dde5;padding:8px;border-radius:4px;font-size:12px}
.prompt .report{background:#eef4ff}.prompt .marker{background:#fec84b;font-weight:700}
.prompt .elided{background:#f2f4f7;color:#98a2b3;text-decoration:line-through}
dl.facts{display:grid;grid-template-columns:max-content auto;gap:2px 14px;background:#fff;border:1px solid #d8dde5;
 border-radius:6px;padding:8px 12px}dl.facts dt{color:#475467}dl.facts dd{margin:0;overflow-wrap:anywhere}
"""
ICON = ('<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 16 16"><rect width="16" height="16" rx="3" '
        'fill="#1d2430"/><path d="M5 3v10h6" stroke="#cfe0ff" stroke-width="2" fill="none"/></svg>')


def layout(title: str, body: str, nav: Sequence[tuple[str, str]] = ()) -> str:
    """A whole page: the header's links (href, text), the title, the body (already HTML)."""
    links = "".join(f'<a href="{e(href)}">{e(text)}</a>' for href, text in [("/", "All sources"), *nav])
    return ('<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
            '<meta name="viewport" content="width=device-width,initial-scale=1">'
            f'<title>{e(title)} · lifesearch view</title><link rel="stylesheet" href="/static/view.css"><link rel="icon" href="/static/icon.svg"></head>'
            f"<body><header>{links}</header><main><h1>{e(title)}</h1>{body}</main></body></html>\n")


def source_nav(n: int) -> list[tuple[str, str]]:
    return [(f"/s/{n}/", "Leaderboard"), (f"/s/{n}/decisions", "Decisions"), (f"/s/{n}/disagreements", "Disagreements")]


def verdict_html(v: int) -> str:
    return {1: '<span class="yes">✓ true</span>', 0: '<span class="no">✗ false</span>'}.get(v, '<span class="ung">? ungraded</span>')


def label_html(v: int) -> str:
    return {1: '<span class="yes">true</span>', 0: '<span class="no">false</span>'}.get(v, '<span class="muted">—</span>')


def p_html(p: float) -> str:
    return "—" if np.isnan(p) else f"{p:.3f}"


def problems_html(src: Source) -> str:
    return "".join(f'<p class="warn">{e(p)}</p>' for p in src.problems)


# -- the sources ------------------------------------------------------------------------------
def home(sources: Sequence[Source]) -> str:
    rows = []
    for n, s in enumerate(sources):
        ix = s.index
        cut = int((ix.truncated > 0).sum())
        rows.append([f'<a href="/s/{n}/">{e(s.name)}</a>',
                     f'<a href="/s/{n}/decisions">decisions</a> · <a href="/s/{n}/disagreements">disagreements</a>',
                     e(", ".join(ix.judges.names)), str(len(ix)), str(len(ix.agents.names)), str(len(ix.tasks.names)),
                     str(cut), "yes" if s.labels_path else "—"])
    body = table(["Source", "Open", "Judges", "Decisions", "Agents", "Tasks", "Decisions cut", "Labels"], rows,
                 tid="sources", num_from=3)
    return layout("Runs and judgments files", body + diff_form(sources))


def diff_form(sources: Sequence[Source], a: str = "", b: str = "") -> str:
    """Two judges (of one source or of two) to set side by side."""
    opts = [(f"{n}:{j}", f"{s.name} · {j}") for n, s in enumerate(sources) for j in s.index.judges.names]
    if len(opts) < 2:
        return ""

    def sel(name: str, chosen: str, default: int) -> str:
        chosen = chosen or opts[min(default, len(opts) - 1)][0]
        inner = "".join(f'<option value="{e(v)}"{" selected" if v == chosen else ""}>{e(t)}</option>' for v, t in opts)
        return f'<label>{name.upper()}<select name="{name}">{inner}</select></label>'

    return ('<h2>Two judges side by side</h2><form class="filters pair" method="get" action="/diff">'
            f'{sel("a", a, 0)}{sel("b", b, 1)}<button type="submit">Compare</button></form>'
            '<p class="muted">Judges of one run, or the same judge in two runs: the decisions both made, those that '
            "differ first by |Δp_true|.</p>")


# -- one source: its leaderboard --------------------------------------------------------------
def source_page(n: int, src: Source) -> str:
    ix = src.index
    cards = [("decisions", len(ix)), ("judges", len(ix.judges.names)), ("agents", len(ix.agents.names)),
             ("tasks", len(ix.tasks.names)), ("ungraded", int((ix.verdict == -1).sum())),
             ("decisions cut", int((ix.truncated > 0).sum())), ("labelled", int((ix.label != -1).sum()))]
    body = [problems_html(src), cut_caveat(n, src), '<div class="cards">'
            + "".join(f'<div class="card"><b>{v}</b>{e(k)}</div>' for k, v in cards) + "</div>"]
    body.append(leaderboard_html(src))
    body.append(replays_html(src.manifest))
    if src.root is not None:
        files = sorted(p.name for p in src.root.iterdir() if p.is_file() and not p.is_symlink())
        body.append("<h2>Files</h2><p>" + " · ".join(
            f'<a href="/s/{n}/files/{quote(f)}">{e(f)}</a>' for f in files) + "</p>")
    return layout(src.name, "".join(body), source_nav(n))


def leaderboard_html(src: Source) -> str:
    board = src.leaderboard()
    if "error" in board:
        return f'<h2>Leaderboard</h2><p class="warn">No scores: {e(board["error"])}</p>'
    out = ['<h2>Leaderboard</h2><p class="muted">Score = mean over tasks of Σw·y/Σw (%); 95% bootstrap CI over '
           "tasks (a task's runs resampled together), as <code>lifesearch score</code> computes them.</p>"]
    ix = src.index
    for judge, rows in board["scores"].items():
        u = board["uncertainty"].get(judge)
        code = ix.judges.codes.get(judge, -2)
        body = []
        for agent, r in sorted(rows.items(), key=lambda kv: -kv[1].overall_mean):
            mine = (ix.judge == code) & (ix.agent == ix.agents.codes.get(agent, -2))
            ci = u.ci95.get(agent) if u else None
            why = u.ci_reason.get(agent) if u else None
            body.append([e(agent), mean_ci(r.overall_mean, ci, why), mean_pm_std(r.overall_mean, r.overall_std),
                         str(len(r.runs)), str(u.n_tasks.get(agent, "—") if u else "—"), str(r.ungraded),
                         str(r.missing), str(int((mine & (ix.truncated > 0)).sum())), str(reports_cut(ix, mine))])
        out.append(f"<h3>Judge {e(judge)}</h3>" + table(
            ["Agent", "Score [95% CI]", "Mean ± std over runs", "Runs", "Tasks", "Ungraded", "Missing", "Decisions cut",
             "Reports cut"], body, tid=f"board-{judge}"))
        if u and u.comparisons:
            cmp = [[e(c.a), e(c.b), signed_ci(c.diff, c.ci95, c.ci_reason), fmt_p(c.p_holm),
                    "yes" if c.holds else "no", str(c.n_tasks)] for c in u.comparisons]
            out.append('<details><summary>Paired comparisons (points, A − B)</summary>' + table(
                ["A", "B", "A − B [95% CI]", "p (Holm)", "Holds at 0.05", "Tasks"], cmp, num_from=2) + "</details>")
    return "".join(out)


def reports_cut(ix: DecisionIndex, mask: np.ndarray) -> int:
    """Reports (task, agent, run) with at least one decision of `mask` made on a cut text."""
    hit = mask & (ix.truncated > 0)
    return len(set(zip(ix.task[hit].tolist(), ix.agent[hit].tolist(), ix.run[hit].tolist())))


def cut_caveat(n: int, src: Source) -> str:
    """A warning when some decision was made on a report the judge's context cut, naming the limit."""
    ix = src.index
    count = int((ix.truncated > 0).sum())
    if not count:
        return ""
    limits = []
    for judge in dict.fromkeys(name.split("#")[0] for name in ix.judges.names):  # a judge id, all its repetitions
        cfg = ((src.manifest or {}).get("stage_configs") or {}).get(f"judge/{judge}") or {}
        model = cfg.get("model") if isinstance(cfg, dict) else None
        if isinstance(model, dict) and model.get("max_model_len"):
            limits.append(f"{judge}: max_model_len {model['max_model_len']}")
    where = f" (recorded limits: {'; '.join(limits)})" if limits else ""
    return (f'<p class="warn">{count} decision(s) on {reports_cut(ix, np.ones(len(ix), bool))} report(s) were made on a '
            f"cut report: the judge read only its head and tail, to fit its context{e(where)}. Raise the judge "
            "model's <code>max_model_len</code> (up to the model's positions) or use a model with a longer context, "
            f'and judge again. <a href="/s/{n}/decisions?truncated=yes">The decisions made on a cut report</a>.</p>')


def replays_html(manifest: dict | None) -> str:
    replays = (manifest or {}).get("replays") or []
    if not replays:
        return ""
    rows = [[e(r.get("at")), str(r.get("sampled")), str(r.get("eligible")),
             "—" if r.get("max_abs_dp") is None else f"{r['max_abs_dp']:.4f}", str(r.get("flips")),
             e("; ".join(f"{j}: {', '.join(d) or 'same judge'}" for j, d in (r.get("judges") or {}).items()))]
            for r in replays if isinstance(r, dict)]
    return ("<h2>Replays (<code>lifesearch rejudge</code>)</h2>"
            + table(["At", "Sampled", "Eligible", "max |Δp|", "Flips", "Fingerprint"], rows, num_from=1))


# -- the decisions table ----------------------------------------------------------------------
def _select(name: str, values: Sequence[str], chosen: str, label: str) -> str:
    inner = '<option value="">any</option>' + "".join(
        f'<option value="{e(v)}"{" selected" if v == chosen else ""}>{e(v)}</option>' for v in values)
    return f'<label>{e(label)}<select name="{name}">{inner}</select></label>'


def filter_form(n: int, ix: DecisionIndex, q: Query) -> str:
    parts = [_select("task", ix.tasks.names, q.task, "Task"), _select("agent", ix.agents.names, q.agent, "Agent"),
             _select("rubric", sorted(ix.rubrics.names), q.rubric, "Rubric"),
             _select("judge", ix.judges.names, q.judge, "Judge"), _select("verdict", list(VERDICTS), q.verdict, "Verdict"),
             _select("agreement", AGREEMENT, q.agreement, "Agreement with labels"),
             _select("truncated", TRUNCATED, q.truncated, "Report cut"),
             f'<label>Search<input type="search" name="q" value="{e(q.q)}" placeholder="criterion, reason, id"></label>',
             '<label>Order<select name="sort">' + "".join(
                 f'<option value="{s}"{" selected" if s == q.sort else ""}>{s}</option>' for s in SORTS) + "</select></label>",
             '<button type="submit">Apply</button>', f'<a href="/s/{n}/decisions">clear</a>']
    return f'<form class="filters" method="get" action="/s/{n}/decisions">{"".join(parts)}</form>'


def pager(base: str, q: Query, pg: Page) -> str:
    def link(p: int, text: str) -> str:
        return f'<a href="{e(base)}?{e(q.encode(page=p))}">{e(text)}</a>'

    bits = [link(1, "« first")] if pg.page > 1 else []
    bits += [link(pg.page - 1, "‹ previous")] if pg.page > 1 else []
    bits.append(f"<span>page {pg.page} of {pg.pages}</span>")
    bits += [link(pg.page + 1, "next ›"), link(pg.pages, "last »")] if pg.page < pg.pages else []
    return f'<p class="pager">{"".join(bits)}</p>'


def short(text: str | None, n: int = 160) -> str:
    text = text or ""
    return text if len(text) <= n else text[: n - 1] + "…"


def decisions_page(n: int, src: Source, q: Query, pg: Page, reasons: dict[int, str | None], title: str = "Decisions") -> str:
    """One page of the decisions table; `reasons`: the reason of each row shown (read from its line)."""
    ix = src.index
    rows = []
    for i in pg.rows:
        link = f"/s/{n}/d/{i}" + (f"?{q.encode()}" if q.encode() else "")
        t, a, run, rub = ix.key(i)
        rows.append([f'<a href="{e(link)}">{i}</a>', e(t), e(a), str(run), e(rub), e(ix.judge_of(i)),
                     verdict_html(int(ix.verdict[i])), p_html(float(ix.p_true[i])), label_html(int(ix.label[i])),
                     str(int(ix.truncated[i])) if ix.truncated[i] else "", e(short(reasons.get(i)))])
    head = ["#", "Task", "Agent", "Run", "Rubric", "Judge", "Verdict", "p_true", "Label", "Tokens cut", "Reason"]
    found = f'<p class="muted" id="found">{pg.total} of {len(ix)} decisions{" match" if q.filtered else ""}.</p>'
    grid = table(head, rows, tid="decisions", num_from=len(head))
    return layout(f"{title} · {src.name}", problems_html(src) + filter_form(n, ix, q) + found + grid
                  + pager(f"/s/{n}/decisions", q, pg), source_nav(n))


# -- two judges side by side ------------------------------------------------------------------
def diff_page(sources: Sequence[Source], a: tuple[int, str], b: tuple[int, str], rows: list[DiffRow], matched: int,
              pg: Page, only_differ: bool) -> str:
    sa, sb = sources[a[0]], sources[b[0]]
    name_a, name_b = f"{sa.name} · {a[1]}", f"{sb.name} · {b[1]}"
    body = []
    for k in pg.rows:
        r = rows[k]
        t, ag, run, rub = sa.index.key(r.a)
        body.append([e(t), e(ag), str(run), e(rub),
                     f'<a href="/s/{a[0]}/d/{r.a}">{verdict_html(int(sa.index.verdict[r.a]))} {p_html(float(sa.index.p_true[r.a]))}</a>',
                     f'<a href="/s/{b[0]}/d/{r.b}">{verdict_html(int(sb.index.verdict[r.b]))} {p_html(float(sb.index.p_true[r.b]))}</a>',
                     "—" if r.dp is None else f"{r.dp:.3f}", "yes" if r.flip else ""])
    flips = sum(r.flip for r in rows)
    base = {"a": f"{a[0]}:{a[1]}", "b": f"{b[0]}:{b[1]}"}
    toggle = urlencode({**base, "only": "all" if only_differ else "differ"})
    intro = (f'<p>A = <b>{e(name_a)}</b>, B = <b>{e(name_b)}</b>. {matched} decisions made by both; '
             f'{len(rows)} shown ({"only those that differ" if only_differ else "all"}), {flips} verdict flip(s). '
             f'<a href="/diff?{e(toggle)}">{"show all matched" if only_differ else "only those that differ"}</a></p>')
    pages = "".join(
        f'<a href="/diff?{e(urlencode({**base, "only": "differ" if only_differ else "all", "page": p}))}">{p}</a> '
        for p in range(max(1, pg.page - 5), min(pg.pages, pg.page + 5) + 1) if p != pg.page)
    grid = table(["Task", "Agent", "Run", "Rubric", "A", "B", "|Δp|", "Flip"], body, tid="diff", num_from=6)
    return layout("Diff of two judges", intro + grid
                  + f'<p class="pager"><span>page {pg.page} of {pg.pages}</span> {pages}</p>'
                  + diff_form(sources, base["a"], base["b"]))
