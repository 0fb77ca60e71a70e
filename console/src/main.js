// The graphrecall console: one page, routed by the URL fragment (#/org/acme/user/alice/facts). It reads and changes
// memory only through the HTTP API, with the key the person entered; it keeps no state on the server.
import "./style.css";
import { api, ApiError, getKey, seg, setKey } from "./api.js";
import { bytes, el, fill, pager, score, table, when } from "./dom.js";
import { drawGraph } from "./graph.js";

const app = document.getElementById("app");
const crumbs = document.getElementById("crumbs");
const logout = document.getElementById("logout");
const TABS = ["profile", "sessions", "facts", "graph", "search", "jobs", "erase"];
const PAGE = 50;

const state = { orgs: null, needsKey: true, eraseDraft: null };

logout.addEventListener("click", () => {
  setKey("");
  state.orgs = null;
  // One route, not two: a changed fragment routes through hashchange, and two routes racing would each draw a form.
  if (location.hash === "#/") route();
  else location.hash = "#/";
});
window.addEventListener("hashchange", route);
route();

function parts() {
  return location.hash.replace(/^#\/?/, "").split("/").filter(Boolean).map(decodeURIComponent);
}

function show(...nodes) {
  fill(app, ...nodes);
}

function problem(e) {
  if (e instanceof ApiError && e.status === 401) {
    setKey("");
    state.orgs = null;
    return login("That key was not accepted.");
  }
  const text = e instanceof ApiError ? `${e.message}${e.field ? ` (${e.field})` : ""}` : String(e);
  return el("p", { class: "error", role: "alert" }, text);
}

async function route() {
  const p = parts();
  try {
    if (state.orgs === null) {
      const found = await loadOrgs();
      if (!found) return;
    }
    if (p[0] === "org" && p[1] && p[2] === "user" && p[3]) return await userPage(p[1], p[3], p[4] || "profile", p.slice(5));
    if (p[0] === "org" && p[1]) return await scopesPage(p[1]);
    return orgsPage();
  } catch (e) {
    const shown = problem(e);
    if (shown) show(shown);
  }
}

/** The organisations this key may read; without a key first, since a local console (graphrecall ui) needs none. */
async function loadOrgs() {
  try {
    const found = await api("/v1/orgs");
    state.orgs = found.orgs;
    state.needsKey = found.authenticated;
    logout.hidden = !found.authenticated;
    return true;
  } catch (e) {
    if (e instanceof ApiError && e.status === 401) {
      login(getKey() ? "That key was not accepted." : "");
      return false;
    }
    throw e;
  }
}

function login(message) {
  setCrumbs([]);
  logout.hidden = true;
  const input = el("input", { type: "password", id: "key", name: "key", autocomplete: "off", required: true, placeholder: "gr_…" });
  const form = el(
    "form",
    {
      class: "card login",
      onsubmit: async (ev) => {
        ev.preventDefault();
        setKey(input.value.trim());
        state.orgs = null;
        await route();
      },
    },
    el("h1", {}, "Sign in"),
    el("p", {}, "Enter an API key. It is kept in this tab only and sent as the Authorization header."),
    el("label", { for: "key" }, "API key"),
    input,
    el("button", { type: "submit" }, "Sign in"),
    message ? el("p", { class: "error", role: "alert" }, message) : null,
  );
  show(form);
  input.focus();
  return null;
}

function setCrumbs(items) {
  fill(crumbs, ...items.flatMap((x, i) => (i ? [el("span", { class: "sep" }, "/"), x] : [x])));
}

function link(href, text, attrs = {}) {
  return el("a", { href, ...attrs }, text);
}

function userHref(org, user, tab = "profile") {
  return `#/org/${seg(org)}/user/${seg(user)}/${tab}`;
}

// -- organisations and their users --------------------------------------------------------------------------------
function orgsPage() {
  setCrumbs([]);
  if (state.orgs.length === 1) {
    location.replace(`#/org/${seg(state.orgs[0])}`);
    return;
  }
  show(
    el("h1", {}, "Organisations"),
    state.orgs.length
      ? el("ul", { class: "orgs" }, state.orgs.map((o) => el("li", {}, link(`#/org/${seg(o)}`, o))))
      : el("p", {}, "This key may read no organisation that holds memory yet."),
  );
}

async function scopesPage(org, contains = "", offset = 0) {
  setCrumbs([link(`#/org/${seg(org)}`, org)]);
  const page = await api(`/v1/scopes/${seg(org)}`, { query: { contains, limit: PAGE, offset } });
  const filter = el("input", { type: "search", name: "contains", value: contains, placeholder: "user id contains…", "aria-label": "filter users" });
  const rows = page.scopes.map((s) =>
    el(
      "tr",
      {},
      el("td", {}, link(userHref(org, s.scope.user_id), s.scope.user_id)),
      el("td", { class: "num" }, s.sessions),
      el("td", { class: "num" }, s.rounds),
      el("td", { class: "num" }, s.facts),
      el("td", { class: "num" }, bytes(s.disk_bytes)),
      el("td", {}, when(s.last_write)),
      el("td", { class: "num" }, s.backlog + (s.failed ? ` (${s.failed} failed)` : "")),
    ),
  );
  show(
    el("h1", {}, `Users of ${org}`),
    el(
      "form",
      { class: "bar", onsubmit: (ev) => (ev.preventDefault(), scopesPage(org, filter.value.trim(), 0).catch(fail)) },
      filter,
      el("button", { type: "submit" }, "Filter"),
    ),
    table(["User", "Sessions", "Rounds", "Facts", "On disk", "Last write (UTC)", "Extraction backlog"], rows, { id: "scopes" }),
    pager(offset, PAGE, page.scopes.length, page.total, (o) => scopesPage(org, contains, o).catch(fail)),
  );
}

function fail(e) {
  const shown = problem(e);
  if (shown) show(shown);
}

// -- one user -------------------------------------------------------------------------------------------------------
async function userPage(org, user, tab, rest) {
  if (!TABS.includes(tab)) tab = "profile";
  const base = `/v1/scopes/${seg(org)}/${seg(user)}`;
  setCrumbs([link(`#/org/${seg(org)}`, org), link(userHref(org, user), user)]);
  const body = el("section", { id: "tab", "aria-live": "polite" });
  show(
    el("h1", {}, user),
    el(
      "nav",
      { class: "tabs" },
      TABS.map((t) => link(userHref(org, user, t), t[0].toUpperCase() + t.slice(1), { "aria-current": t === tab ? "page" : null })),
    ),
    body,
  );
  const ctx = { org, user, base, body };
  const view = { profile, sessions, facts, graph, search, jobs, erase }[tab];
  try {
    await view(ctx, rest);
  } catch (e) {
    const shown = problem(e);
    if (shown) fill(body, shown);
  }
}

async function profile({ base, body }) {
  const p = await api(`${base}/profile`);
  fill(body, 
    el("p", { class: "muted" }, `As of ${when(p.as_of)} UTC: the user's current facts by kind, as a system prompt gets them.`),
    p.sections.length
      ? p.sections.map((s) =>
          el(
            "div",
            { class: "card" },
            el("h2", {}, s.title),
            el("ul", {}, s.items.map((i) => el("li", {}, i.text, el("span", { class: "muted" }, ` — ${when(i.date)}${i.session_id ? `, session ${i.session_id}` : ""}`)))),
          ),
        )
      : el("p", {}, "Nothing extracted yet."),
  );
}

async function sessions({ org, user, base, body }, rest, offset = 0) {
  const [open, message] = rest;
  const page = await api(`${base}/sessions`, { query: { limit: PAGE, offset } });
  const list = page.sessions;
  const detail = el("div", { id: "session" });
  fill(body, 
    timeline(list, (s) => (location.hash = `${userHref(org, user, "sessions")}/${seg(s.id)}`)),
    table(
      ["Started (UTC)", "Session", "Extraction"],
      list.map((s) =>
        el("tr", {}, el("td", {}, when(s.started_at)), el("td", {}, link(`${userHref(org, user, "sessions")}/${seg(s.id)}`, s.id)), el("td", {}, s.extract_status)),
      ),
    ),
    pager(offset, PAGE, list.length, undefined, (o) => sessions({ org, user, base, body }, rest, o).catch(fail)),
    detail,
  );
  if (open) {
    const s = await api(`${base}/sessions/${seg(open)}`);
    fill(detail, 
      el("h2", {}, `Session ${s.id}`),
      el("p", { class: "muted" }, `Started ${when(s.started_at)} UTC; extraction ${s.extract_status}`),
      el(
        "ol",
        { class: "messages" },
        s.messages.map((m) =>
          el("li", { id: `m-${m.id}`, class: `msg ${m.role}${m.id === message ? " hl" : ""}` }, el("b", {}, `${m.role} `), el("span", { class: "muted" }, `${when(m.at)} · ${m.id}`), el("p", {}, m.content)),
        ),
      ),
    );
    const target = message && document.getElementById(`m-${message}`);
    (target || detail).scrollIntoView({ block: "center" });
  }
}

/** Sessions of the page as dots on a time axis (SVG); a click opens one. */
function timeline(list, open) {
  const ns = "http://www.w3.org/2000/svg";
  const svg = document.createElementNS(ns, "svg");
  svg.setAttribute("viewBox", "0 0 1000 60");
  svg.setAttribute("class", "timeline");
  svg.setAttribute("role", "img");
  svg.setAttribute("aria-label", "sessions on a timeline");
  if (!list.length) return svg;
  const times = list.map((s) => Date.parse(s.started_at + (s.started_at.endsWith("Z") ? "" : "Z")));
  const lo = Math.min(...times);
  const span = Math.max(...times) - lo || 1;
  const axis = document.createElementNS(ns, "line");
  Object.entries({ x1: 10, x2: 990, y1: 30, y2: 30, class: "axis" }).forEach(([k, v]) => axis.setAttribute(k, v));
  svg.append(axis);
  list.forEach((s, i) => {
    const dot = document.createElementNS(ns, "circle");
    const x = 10 + ((times[i] - lo) / span) * 980;
    Object.entries({ cx: x, cy: 30, r: 7, class: `dot ${s.extract_status}` }).forEach(([k, v]) => dot.setAttribute(k, v));
    const title = document.createElementNS(ns, "title");
    title.textContent = `${s.id} — ${when(s.started_at)}`;
    dot.append(title);
    dot.addEventListener("click", () => open(s));
    svg.append(dot);
  });
  for (const [x, t] of [[10, lo], [990, lo + span]]) {
    const label = document.createElementNS(ns, "text");
    Object.entries({ x, y: 56, "text-anchor": x < 500 ? "start" : "end", class: "tick" }).forEach(([k, v]) => label.setAttribute(k, v));
    label.textContent = new Date(t).toISOString().slice(0, 10);
    svg.append(label);
  }
  return svg;
}

async function facts(ctx, rest, opts = { asOf: "", all: false, offset: 0 }) {
  const { org, user, base, body } = ctx;
  const asOf = el("input", { type: "date", id: "as-of", value: opts.asOf, "aria-label": "as of" });
  const all = el("input", { type: "checkbox", id: "all", checked: opts.all });
  const query = { limit: PAGE, offset: opts.offset, include_superseded: opts.all && !opts.asOf ? "true" : undefined, as_of: opts.asOf ? `${opts.asOf}T23:59:59` : undefined };
  const list = (await api(`${base}/facts`, { query })).facts;
  const history = el("div", { id: "history" });
  const reload = (changes) => facts(ctx, rest, { ...opts, offset: 0, ...changes }).catch(fail);
  fill(body, 
    el(
      "form",
      { class: "bar", onsubmit: (ev) => (ev.preventDefault(), reload({ asOf: asOf.value, all: all.checked })) },
      el("label", { for: "as-of" }, "What was true on "),
      asOf,
      el("label", {}, all, " include superseded"),
      el("button", { type: "submit" }, "Show"),
    ),
    el("p", { class: "muted" }, opts.asOf ? `Facts true on ${opts.asOf} (end of day, UTC).` : opts.all ? "Every version, superseded ones included." : "The current facts."),
    table(
      ["Fact", "Kind", "Valid from", "Valid to", "Session", ""],
      list.map((f) =>
        el(
          "tr",
          { class: f.expired_at ? "superseded" : "" },
          el("td", {}, f.text, f.superseded_by ? el("span", { class: "badge" }, "superseded") : null),
          el("td", {}, f.kind),
          el("td", {}, when(f.valid_from)),
          el("td", {}, when(f.valid_to)),
          el("td", {}, f.session_id ? sourceLink(org, user, f.session_id, f.message_ids[0]) : ""),
          el(
            "td",
            { class: "actions" },
            el("button", { type: "button", class: "history", onclick: () => showHistory(ctx, f.id, history).catch(fail) }, "History"),
            el("button", { type: "button", class: "danger", onclick: () => ((state.eraseDraft = { fact_ids: [f.id] }), (location.hash = userHref(org, user, "erase"))) }, "Erase…"),
          ),
        ),
      ),
      { id: "facts" },
    ),
    pager(opts.offset, PAGE, list.length, undefined, (o) => facts(ctx, rest, { ...opts, offset: o }).catch(fail)),
    history,
  );
}

function sourceLink(org, user, sessionId, messageId) {
  const tail = messageId ? `/${seg(messageId)}` : "";
  return link(`${userHref(org, user, "sessions")}/${seg(sessionId)}${tail}`, sessionId);
}

async function showHistory({ org, user, base }, factId, into) {
  const h = await api(`${base}/facts/${seg(factId)}/history`);
  fill(into, 
    el("h2", {}, "History"),
    el("p", { class: "muted" }, "Oldest first; each version with when it held and the session it was said in."),
    el(
      "ol",
      { class: "chain" },
      h.versions.map((f) =>
        el(
          "li",
          { class: f.expired_at ? "old" : "now" },
          el("b", {}, f.text),
          el("div", { class: "muted" }, `valid ${when(f.valid_from) || "?"} → ${f.valid_to ? when(f.valid_to) : "now"} · recorded ${when(f.recorded_at)}`),
          el("div", {}, "said in session ", f.session_id ? sourceLink(org, user, f.session_id, f.message_ids[0]) : "?", f.superseded_by ? ` · replaced by ${f.superseded_by}` : " · current"),
        ),
      ),
    ),
  );
  into.scrollIntoView({ block: "nearest" });
}

async function graph({ org, user, base, body }) {
  const g = await api(`${base}/graph`, { query: { include_superseded: "true", limit: 200 } });
  const panel = el("aside", { class: "card", id: "node" }, "Click a node: an entity, a fact or an event.");
  const box = el("div", { id: "cy", role: "img", "aria-label": "memory graph" });
  fill(body, 
    el("p", { class: "muted" }, `${g.nodes.length} nodes, ${g.edges.length} edges${g.more ? " (the first page: more facts and events exist)" : ""}. Entities are round, facts square, events diamonds; dashed: superseded.`),
    el("div", { class: "graph" }, box, panel),
  );
  drawGraph(box, g, (node) => {
    fill(panel, 
      el("h2", {}, node.kind),
      el("p", {}, node.label),
      el("p", { class: "muted" }, [node.type, when(node.date), node.kind === "fact" && !node.current ? "superseded" : ""].filter(Boolean).join(" · ")),
      node.session_id ? el("p", {}, "Source: ", sourceLink(org, user, node.session_id, node.message_ids[0])) : null,
    );
  });
}

async function search({ base, body }, rest, last = {}) {
  const q = el("input", { type: "search", id: "q", name: "query", required: true, value: last.query || "", placeholder: "a question", "aria-label": "question" });
  const date = el("input", { type: "date", id: "qdate", value: last.date || "", "aria-label": "question date" });
  const kinds = ["round", "fact", "event"].map((k) => el("input", { type: "checkbox", value: k, checked: (last.kinds || ["round", "fact"]).includes(k) }));
  const out = el("div", { id: "results" });
  fill(body, 
    el(
      "form",
      {
        class: "bar",
        onsubmit: async (ev) => {
          ev.preventDefault();
          const chosen = kinds.filter((k) => k.checked).map((k) => k.value);
          const query = { query: q.value, question_date: date.value ? `${date.value}T23:59:59` : undefined };
          try {
            const [hits, context] = await Promise.all([
              api(`${base}/search`, { query: { ...query, kinds: chosen.length ? chosen : ["round"], k: 10 } }),
              api(`${base}/context`, { query: { ...query, token_budget: 1000 } }),
            ]);
            showHits(out, hits.hits, context);
          } catch (e) {
            fill(out, problem(e) || "");
          }
        },
      },
      q,
      el("label", {}, "asked on ", date),
      kinds.map((k) => el("label", {}, k, ` ${k.value}`)),
      el("button", { type: "submit" }, "Search"),
    ),
    out,
  );
}

function showHits(out, hits, context) {
  const names = [...new Set(hits.flatMap((h) => Object.keys(h.signals)))].sort();
  fill(out, 
    el("h2", {}, `${hits.length} hits`),
    el("p", { class: "muted" }, "Each signal of each hit (empty: that generator did not find it): vector, BM25, time, graph, rerank and the fused score; then the final score the ranking used."),
    table(
      ["#", "Kind", "Date", "Text", ...names, "Score"],
      hits.map((h) =>
        el(
          "tr",
          { class: "hit" },
          el("td", {}, h.rank),
          el("td", {}, h.kind),
          el("td", {}, when(h.date)),
          el("td", { class: "text" }, h.text.length > 280 ? `${h.text.slice(0, 280)}…` : h.text),
          names.map((n) => el("td", { class: "num signal", "data-signal": n }, score(h.signals[n]))),
          el("td", { class: "num" }, score(h.score)),
        ),
      ),
      { id: "hits" },
    ),
    el("h2", {}, "What the Reader would get"),
    el("p", { class: "muted" }, `${context.token_count}/${context.token_budget} tokens${context.truncated ? ", truncated" : ""}`),
    el("pre", { id: "context" }, context.text),
  );
}

async function jobs({ base, body }, rest, status = "") {
  const q = await api(`${base}/extraction-jobs`, { query: { status, limit: PAGE } });
  const picker = el("select", { "aria-label": "status", onchange: () => jobs({ base, body }, rest, picker.value).catch(fail) }, ["", "pending", "running", "failed", "done"].map((s) => el("option", { value: s, selected: s === status }, s || "every status")));
  const note = el("p", { role: "status" });
  fill(body, 
    el("p", {}, Object.entries(q.counts).map(([k, n]) => `${n} ${k}`).join(" · ")),
    el(
      "div",
      { class: "bar" },
      picker,
      el(
        "button",
        {
          type: "button",
          disabled: !q.counts.failed,
          onclick: async () => {
            try {
              const r = await api(`${base}/extraction-jobs/retry`, { method: "POST" });
              note.textContent = `Queued ${r.requeued} failed extraction(s) again.`;
            } catch (e) {
              note.textContent = e.message;
            }
          },
        },
        "Retry failed",
      ),
    ),
    note,
    table(
      ["Session", "Status", "Attempts", "Updated (UTC)", "Reason"],
      q.jobs.map((j) => el("tr", {}, el("td", {}, j.session_id), el("td", {}, j.status), el("td", { class: "num" }, j.attempts), el("td", {}, when(j.updated_at)), el("td", {}, j.reason || ""))),
    ),
  );
}

async function erase({ base, body }) {
  const draft = state.eraseDraft || {};
  state.eraseDraft = null;
  const fields = {
    matching: el("input", { type: "text", id: "matching", value: draft.matching || "", placeholder: "words" }),
    session_ids: el("input", { type: "text", id: "sessions", value: (draft.session_ids || []).join(" "), placeholder: "session ids, space-separated" }),
    fact_ids: el("input", { type: "text", id: "facts-to-erase", value: (draft.fact_ids || []).join(" "), placeholder: "fact ids, space-separated" }),
    before: el("input", { type: "date", id: "before" }),
  };
  const out = el("div", { id: "preview" });
  const request = () => {
    const ids = (s) => s.split(/\s+/).filter(Boolean);
    return {
      matching: fields.matching.value.trim() || undefined,
      session_ids: ids(fields.session_ids.value).length ? ids(fields.session_ids.value) : undefined,
      fact_ids: ids(fields.fact_ids.value).length ? ids(fields.fact_ids.value) : undefined,
      before: fields.before.value ? `${fields.before.value}T00:00:00` : undefined,
    };
  };
  fill(body, 
    el("p", {}, "Forget part of this user's memory, with everything derived from it. The preview lists the text of every record that would go; nothing is deleted until you confirm."),
    el(
      "form",
      {
        class: "stack",
        onsubmit: async (ev) => {
          ev.preventDefault();
          const asked = request();
          try {
            const dry = await api(`${base}/erase`, { method: "POST", body: { ...asked, dry_run: true } });
            preview(out, dry, async () => {
              try {
                const done = await api(`${base}/erase`, { method: "POST", body: asked });
                fill(out, el("p", { class: "ok", role: "status" }, `Erased ${done.items.length + done.items_omitted} records (${done.facts.length} facts, ${done.messages.length} messages, ${done.sessions.length} sessions).`));
              } catch (e) {
                fill(out, problem(e) || "");
              }
            });
          } catch (e) {
            fill(out, problem(e) || "");
          }
        },
      },
      el("label", {}, "Whose text holds the words ", fields.matching),
      el("label", {}, "Sessions ", fields.session_ids),
      el("label", {}, "Facts ", fields.fact_ids),
      el("label", {}, "Sessions started before ", fields.before),
      el("button", { type: "submit" }, "Preview"),
    ),
    out,
  );
}

function preview(out, dry, confirm) {
  const count = dry.items.length + dry.items_omitted;
  if (!count) {
    fill(out, el("p", {}, "Nothing matches: nothing would be erased."));
    return;
  }
  fill(out, 
    el("h2", {}, `This would erase ${count} records`),
    dry.warnings.map((w) => el("p", { class: "warning", role: "alert" }, w)),
    table(
      ["Kind", "Text", "Why", "Date"],
      dry.items.map((i) =>
        el(
          "tr",
          { class: i.beyond_match ? "whole" : "" },
          el("td", {}, i.kind),
          el("td", { class: "text" }, i.text, i.beyond_match ? el("span", { class: "badge" }, "whole message") : null),
          el("td", {}, i.reason),
          el("td", {}, when(i.date)),
        ),
      ),
      { id: "erase-items" },
    ),
    dry.items_omitted ? el("p", {}, `…and ${dry.items_omitted} more.`) : null,
    el("button", { type: "button", class: "danger", id: "confirm-erase", onclick: confirm }, `Erase these ${count} records`),
  );
}
