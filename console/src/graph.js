// The memory graph, drawn by cytoscape.js: entities (round), facts (square) and events (diamond) with their edges.
// Labels are passed as data and drawn on the canvas, so no text of memory ever becomes markup.
import cytoscape from "cytoscape";

const COLORS = { entity: "#2f6f9f", fact: "#3c8d4f", event: "#b0632a" };

export function drawGraph(container, graph, onSelect) {
  const short = (s) => (s.length > 40 ? `${s.slice(0, 39)}…` : s);
  const nodes = graph.nodes.map((n) => ({
    data: { id: n.id, label: short(n.label), kind: n.kind, old: n.kind === "fact" && !n.current ? 1 : 0, node: n },
  }));
  const edges = graph.edges.map((e, i) => ({
    data: { id: `e${i}`, source: e.source, target: e.target, label: e.label ? `${e.kind}: ${e.label}` : e.kind },
  }));
  const cy = cytoscape({
    container,
    elements: [...nodes, ...edges],
    minZoom: 0.2,
    maxZoom: 3,
    style: [
      {
        selector: "node",
        style: {
          label: "data(label)",
          "font-size": 10,
          "text-wrap": "wrap",
          "text-max-width": 120,
          "text-valign": "bottom",
          "text-margin-y": 4,
          width: 22,
          height: 22,
          color: "#222",
        },
      },
      ...Object.entries(COLORS).map(([kind, color]) => ({ selector: `node[kind = "${kind}"]`, style: { "background-color": color } })),
      { selector: 'node[kind = "fact"]', style: { shape: "round-rectangle" } },
      { selector: 'node[kind = "event"]', style: { shape: "diamond" } },
      { selector: "node[old = 1]", style: { "background-opacity": 0.35, "border-width": 2, "border-style": "dashed", "border-color": "#3c8d4f" } },
      { selector: "node:selected", style: { "border-width": 3, "border-color": "#111" } },
      {
        selector: "edge",
        style: {
          width: 1.5,
          "line-color": "#aaa",
          "target-arrow-color": "#aaa",
          "target-arrow-shape": "triangle",
          "curve-style": "bezier",
          label: "data(label)",
          "font-size": 8,
          color: "#666",
          "text-rotation": "autorotate",
          "text-background-color": "#fff",
          "text-background-opacity": 0.8,
        },
      },
    ],
    layout: { name: "cose", animate: false, randomize: true, padding: 40, nodeRepulsion: () => 400000, idealEdgeLength: () => 140, nodeOverlap: 40 },
  });
  // A small graph fitted to the box would be drawn huge; cap the zoom so labels keep their size.
  if (cy.zoom() > 1.1) {
    cy.zoom(1.1);
    cy.center();
  }
  cy.on("tap", "node", (ev) => onSelect(ev.target.data("node")));
  container.cy = cy; // for scripts driving the page (the browser test taps a node through it)
  container.dataset.ready = "true";
  return cy;
}
