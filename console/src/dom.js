// Building the page. Everything a user or a model wrote (messages, facts, entity names) becomes a text node, never
// markup: memory contents are untrusted, and the API key sits in this page's sessionStorage.

/** ``el("td", {class: "x"}, "text", child)``: attributes set one by one; strings become text nodes. */
export function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith("on") && typeof v === "function") node.addEventListener(k.slice(2), v);
    else if (k === "dataset") Object.assign(node.dataset, v);
    else node.setAttribute(k, v === true ? "" : String(v));
  }
  append(node, children);
  return node;
}

/** Replace ``node``'s children; arrays are flattened and strings become text nodes, as in ``el``. */
export function fill(node, ...children) {
  node.replaceChildren();
  append(node, children);
  return node;
}

function append(node, children) {
  for (const c of children) {
    if (c === undefined || c === null || c === false) continue;
    if (Array.isArray(c)) append(node, c);
    else node.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
}

/** A table in a horizontally scrolling box (readable on a phone): ``rows`` are arrays of cells. */
export function table(headers, rows, attrs = {}) {
  return el(
    "div",
    { class: "scroll" },
    el(
      "table",
      attrs,
      el("thead", {}, el("tr", {}, headers.map((h) => el("th", { scope: "col" }, h)))),
      el("tbody", {}, rows),
    ),
  );
}

/** A date as UTC to the minute ("2024-03-05 18:30"); the API's dates are UTC. */
export function when(value) {
  if (!value) return "";
  const s = String(value);
  return s.replace("T", " ").slice(0, 16);
}

export function bytes(n) {
  if (n < 1e6) return `${Math.round(n / 1e3)} KB`;
  if (n < 1e9) return `${(n / 1e6).toFixed(1)} MB`;
  return `${(n / 1e9).toFixed(2)} GB`;
}

export function score(x) {
  return typeof x === "number" ? x.toFixed(4) : "";
}

/** Previous / next buttons for a server-side page. */
export function pager(offset, limit, shown, total, go) {
  const last = total === undefined ? shown < limit : offset + shown >= total;
  const of = total === undefined ? "" : ` of ${total}`;
  return el(
    "div",
    { class: "pager" },
    el("button", { type: "button", disabled: offset === 0, onclick: () => go(Math.max(0, offset - limit)) }, "‹ Previous"),
    el("span", {}, shown ? `${offset + 1}–${offset + shown}${of}` : `none${of}`),
    el("button", { type: "button", disabled: last, onclick: () => go(offset + limit) }, "Next ›"),
  );
}
