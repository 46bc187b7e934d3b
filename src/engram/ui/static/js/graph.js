// A small force-directed layout drawn as SVG: nodes repel, co-occurrence edges pull, a weak
// gravity keeps components on screen. Deterministic (nodes start on a circle), so the same graph
// always looks the same.

import { s } from "./dom.js";

const ITERATIONS = 300;

function layout(nodes, edges, width, height) {
  const n = nodes.length;
  const index = new Map(nodes.map((node, i) => [node.id, i]));
  const x = new Float64Array(n);
  const y = new Float64Array(n);
  for (let i = 0; i < n; i++) {
    const angle = (2 * Math.PI * i) / Math.max(n, 1);
    x[i] = width / 2 + (width / 3) * Math.cos(angle);
    y[i] = height / 2 + (height / 3) * Math.sin(angle);
  }
  const links = edges
    .map((e) => [index.get(e.source), index.get(e.target), e.weight || 1])
    .filter(([a, b]) => a !== undefined && b !== undefined && a !== b);
  const ideal = Math.sqrt((width * height) / Math.max(n, 1)) * 0.6;
  let temperature = width / 8;
  const dx = new Float64Array(n);
  const dy = new Float64Array(n);
  for (let step = 0; step < ITERATIONS; step++) {
    dx.fill(0);
    dy.fill(0);
    for (let i = 0; i < n; i++) {
      for (let j = i + 1; j < n; j++) {
        let ddx = x[i] - x[j];
        let ddy = y[i] - y[j];
        let dist2 = ddx * ddx + ddy * ddy;
        if (dist2 < 0.01) {
          ddx = 0.1 * (i - j);
          ddy = 0.1;
          dist2 = ddx * ddx + ddy * ddy;
        }
        const force = (ideal * ideal) / dist2;
        dx[i] += ddx * force;
        dy[i] += ddy * force;
        dx[j] -= ddx * force;
        dy[j] -= ddy * force;
      }
    }
    for (const [a, b, weight] of links) {
      const ddx = x[a] - x[b];
      const ddy = y[a] - y[b];
      const dist = Math.sqrt(ddx * ddx + ddy * ddy) || 0.01;
      const pull = (dist / ideal) * (1 + Math.log(weight));
      dx[a] -= ddx * pull;
      dy[a] -= ddy * pull;
      dx[b] += ddx * pull;
      dy[b] += ddy * pull;
    }
    for (let i = 0; i < n; i++) {
      dx[i] += (width / 2 - x[i]) * 0.05;
      dy[i] += (height / 2 - y[i]) * 0.05;
      const length = Math.sqrt(dx[i] * dx[i] + dy[i] * dy[i]) || 1;
      const move = Math.min(length, temperature);
      x[i] += (dx[i] / length) * move;
      y[i] += (dy[i] / length) * move;
    }
    temperature = Math.max(1, temperature * 0.98);
  }
  return { x, y, links };
}

// Scale and centre the layout into the picture; labels sit right of their node, so the right
// margin is wider.
function fit(x, y, width, height) {
  const margin = { left: 30, right: 110, top: 30, bottom: 30 };
  let [minX, maxX, minY, maxY] = [Infinity, -Infinity, Infinity, -Infinity];
  for (let i = 0; i < x.length; i++) {
    minX = Math.min(minX, x[i]);
    maxX = Math.max(maxX, x[i]);
    minY = Math.min(minY, y[i]);
    maxY = Math.max(maxY, y[i]);
  }
  const innerW = width - margin.left - margin.right;
  const innerH = height - margin.top - margin.bottom;
  const fitX = innerW / (maxX - minX || 1);
  const fitY = innerH / (maxY - minY || 1);
  // Stretch along the roomier axis too, but at most 1.6× more than the other: fills the picture
  // without squashing the shape.
  const base = Math.min(fitX, fitY, 1.5);
  const scaleX = Math.min(fitX, base * 1.6);
  const scaleY = Math.min(fitY, base * 1.6);
  const offX = margin.left + (innerW - (maxX - minX) * scaleX) / 2;
  const offY = margin.top + (innerH - (maxY - minY) * scaleY) / 2;
  for (let i = 0; i < x.length; i++) {
    x[i] = offX + (x[i] - minX) * scaleX;
    y[i] = offY + (y[i] - minY) * scaleY;
  }
}

/**
 * `nodes`: [{id, label, weight}], `edges`: [{source, target, weight}]. Returns an <svg>; clicking a
 * node calls `onSelect(node)`, hovering one highlights its neighbours.
 */
export function graphSvg(nodes, edges, { width = 1000, height = 520, onSelect = null } = {}) {
  const { x, y, links } = layout(nodes, edges, width, height);
  if (nodes.length) fit(x, y, width, height);
  const maxWeight = Math.max(1, ...nodes.map((n) => n.weight || 1));
  const maxEdge = Math.max(1, ...links.map(([, , w]) => w));
  const radius = (node) => 5 + 13 * Math.sqrt((node.weight || 1) / maxWeight);

  const edgeEls = links.map(([a, b, weight]) =>
    s("line", {
      class: "edge",
      x1: x[a].toFixed(1),
      y1: y[a].toFixed(1),
      x2: x[b].toFixed(1),
      y2: y[b].toFixed(1),
      "stroke-width": (1 + 3 * (weight / maxEdge)).toFixed(2),
      "data-a": a,
      "data-b": b,
    }, s("title", {}, `${nodes[a].label} — ${nodes[b].label}: ${weight}`)),
  );
  const nodeEls = nodes.map((node, i) => {
    const group = s(
      "g",
      { class: "node", transform: `translate(${x[i].toFixed(1)},${y[i].toFixed(1)})`, "data-index": i, "data-id": node.id },
      s("circle", { r: radius(node).toFixed(1) }),
      s("text", { x: (radius(node) + 3).toFixed(1), y: "4" }, node.label),
      s("title", {}, `${node.label} (${node.weight} mentions)`),
    );
    if (onSelect) group.addEventListener("click", () => onSelect(node));
    return group;
  });
  const svg = s(
    "svg",
    { class: "graph", viewBox: `0 0 ${width} ${height}`, role: "img", "aria-label": "entity co-occurrence graph" },
    s("g", { class: "edges" }, edgeEls),
    s("g", { class: "nodes" }, nodeEls),
  );
  svg.addEventListener("mouseover", (event) => {
    const group = event.target.closest("g.node");
    if (!group) return;
    const i = group.getAttribute("data-index");
    svg.classList.add("focused");
    for (const edge of edgeEls) {
      const hit = edge.getAttribute("data-a") === i || edge.getAttribute("data-b") === i;
      edge.classList.toggle("lit", hit);
      if (hit) {
        nodeEls[edge.getAttribute("data-a")].classList.add("lit");
        nodeEls[edge.getAttribute("data-b")].classList.add("lit");
      }
    }
    group.classList.add("lit");
  });
  svg.addEventListener("mouseout", () => {
    svg.classList.remove("focused");
    svg.querySelectorAll(".lit").forEach((el) => el.classList.remove("lit"));
  });
  return svg;
}
