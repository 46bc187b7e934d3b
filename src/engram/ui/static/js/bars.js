// A bar chart of time buckets (one bar per bucket, its height the bucket's total), as SVG.

import { s } from "./dom.js";

const WIDTH = 720;
const HEIGHT = 120;

/** `buckets`: [{time, total}]; each bar has a <title> with its time and total. */
export function barChart(buckets, label) {
  const peak = Math.max(1, ...buckets.map((b) => b.total));
  const step = WIDTH / Math.max(1, buckets.length);
  return s(
    "svg",
    { class: "bars", viewBox: `0 0 ${WIDTH} ${HEIGHT + 16}`, role: "img", "aria-label": label },
    buckets.map((bucket, i) => {
      const height = Math.round((bucket.total / peak) * HEIGHT);
      return s(
        "rect",
        { class: "bar", x: i * step + 1, y: HEIGHT - height, width: Math.max(1, step - 2), height, "data-total": bucket.total },
        s("title", {}, `${bucket.time}: ${bucket.total}`),
      );
    }),
    s("text", { x: 0, y: HEIGHT + 14, class: "small" }, `peak ${peak}`),
  );
}
