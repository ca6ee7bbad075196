/**
 * Time charts drawn by uPlot, which the gateway serves from its own node_modules (the machines it runs
 * on may have no internet). uPlot writes labels as text (textContent), so series named after subjects
 * or dimension values stay text. Times are in seconds, as uPlot counts them. Sparklines, one per table
 * row, are inline SVG made from numbers alone.
 */
import { svg } from './dom.js';
import uPlot from './uPlot.esm.js';

export const COLORS = ['#2563eb', '#dc2626', '#16a34a', '#d97706', '#7c3aed', '#0891b2', '#db2777', '#4b5563', '#65a30d', '#9333ea', '#0d9488', '#b45309'];
const HEIGHT = 280;

/** The chart each container shows, so a new one replaces it. */
const mounted = new WeakMap();

function mount(container, options, data) {
  mounted.get(container)?.destroy();
  container.replaceChildren();
  const chart = new uPlot({ ...options, width: Math.max(container.clientWidth, 300), height: HEIGHT }, data, container);
  const observer = new ResizeObserver(() => chart.setSize({ width: Math.max(container.clientWidth, 300), height: HEIGHT }));
  observer.observe(container);
  mounted.set(container, {
    destroy() {
      observer.disconnect();
      chart.destroy();
    },
  });
}

/** Zero at the bottom (or top, for negative values), a tenth of headroom above the tallest value. */
function fromZero(_u, min, max) {
  const low = Math.min(0, min ?? 0);
  const high = Math.max(0, max ?? 0);
  return high === low ? [low, low + 1] : [low, high + (high - low) * 0.1];
}

const numberFormat = new Intl.NumberFormat(undefined, { maximumFractionDigits: 3 });

function yAxis(label) {
  return { label, values: (_u, ticks) => ticks.map((t) => numberFormat.format(t)), size: 60 };
}

/**
 * Bars per window, the groups side by side: series k of n is drawn in the k-th n-th of each window.
 * `xs` are window starts, `windowSeconds` their length, `range` the [from, to] the query covered.
 */
export function barChart(container, { xs, windowSeconds, series, timeZone, range, unit }) {
  const slot = windowSeconds / Math.max(series.length, 1);
  const bars = (k) =>
    uPlot.paths.bars({
      disp: {
        x0: { unit: 1, values: (u) => u.data[0].map((x) => x + k * slot + slot * 0.1) },
        size: { unit: 1, values: () => [slot * 0.8] },
      },
    });
  mount(
    container,
    {
      tzDate: (seconds) => uPlot.tzDate(new Date(seconds * 1000), timeZone),
      scales: { x: { time: true, range: () => range }, y: { range: fromZero } },
      axes: [{}, yAxis(unit)],
      series: [
        { label: 'window' },
        ...series.map((s, k) => ({
          label: s.label,
          fill: COLORS[k % COLORS.length],
          stroke: COLORS[k % COLORS.length],
          width: 0,
          paths: bars(k),
          points: { show: false },
        })),
      ],
    },
    [xs, ...series.map((s) => s.values)],
  );
}

/** Lines over time (the browser's time zone) across `range` ([from, to] in seconds), e.g. request rates; a series may name its `color`. */
export function lineChart(container, { xs, series, unit, range }) {
  mount(
    container,
    {
      scales: { x: { time: true, range: () => range }, y: { range: fromZero } },
      axes: [{}, yAxis(unit)],
      series: [{ label: 'time' }, ...series.map((s, k) => ({ label: s.label, stroke: s.color ?? COLORS[k % COLORS.length], width: 2, points: { show: false } }))],
    },
    [xs, ...series.map((s) => s.values)],
  );
}

/** A sparkline's height in CSS pixels; its width is one pixel column per bucket. */
const SPARKLINE_HEIGHT = 32;

/**
 * Counts per bucket as stacked bars one pixel wide, in inline SVG (a uPlot per table row would be a
 * canvas, a legend and a resize observer for each). `layers` are `{name, color, values}` from the bottom
 * up; `max` is the count of a full-height bar, the same for every row of a table so that rows compare.
 * Bar ends are whole pixels, so a bar's height is its count's share of `max`, to the nearest pixel.
 */
export function sparkline({ layers, max, label }) {
  const buckets = layers[0].values.length;
  const y = (n) => SPARKLINE_HEIGHT - Math.round((n / Math.max(max, 1)) * SPARKLINE_HEIGHT);
  const below = new Array(buckets).fill(0);
  const paths = layers.map((layer) => {
    let d = '';
    layer.values.forEach((n, i) => {
      if (n > 0) d += `M${i + 0.5} ${y(below[i])}V${y(below[i] + n)}`;
      below[i] += n;
    });
    return d ? svg('path', { d, stroke: layer.color, 'stroke-width': 1, fill: 'none' }) : null;
  });
  const size = { width: buckets, height: SPARKLINE_HEIGHT, viewBox: `0 0 ${buckets} ${SPARKLINE_HEIGHT}` };
  return svg('svg', { ...size, class: 'sparkline', 'shape-rendering': 'crispEdges', role: 'img', 'aria-label': label }, paths);
}
