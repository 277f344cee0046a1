// A small line chart on <canvas>: x is the training step, y a metric, with
// optional vertical markers (recoveries: where a new attempt begins).
// The canvas carries role="img" and an aria-label summarising the series
// and its markers, and the chart redraws at the element's CSS size (crisp
// on HiDPI screens).

import { h, fmtNumber } from './util.js';
import { placeMarkers } from './metrics.js';

export class LineChart {
  constructor(title, { color = '#2563eb', unit = '', markerColor = '#15803d' } = {}) {
    this.title = title;
    this.color = color;
    this.markerColor = markerColor;
    this.unit = unit;
    this.points = [];
    this.markers = [];
    this.canvas = h('canvas', { role: 'img', 'aria-label': `${title}: no samples yet` });
    this.el = h('figure', { class: 'chart' },
                h('figcaption', {}, title), this.canvas);
    new ResizeObserver(() => this.draw()).observe(this.canvas);
  }

  // points: [{x, y}]; a later point for the same x (a resumed attempt
  // repeating steps) replaces the earlier one.
  set(points) {
    const byX = new Map();
    for (const p of points) if (Number.isFinite(p.x) && Number.isFinite(p.y)) byX.set(p.x, p);
    this.points = [...byX.values()].sort((a, b) => a.x - b.x);
    this.label();
    this.draw();
  }

  // markers: [{step, label}] drawn as dashed vertical lines at their step.
  setMarkers(markers) {
    this.markers = markers || [];
    this.label();
    this.draw();
  }

  label() {
    const last = this.points[this.points.length - 1];
    const marks = this.markers.length
      ? `; ${this.markers.map((m) => `${m.label} from step ${m.step}`).join(', ')}` : '';
    this.canvas.setAttribute('aria-label', last
      ? `${this.title}: ${this.points.length} samples, latest ${fmtNumber(last.y, 3)}${this.unit} at step ${last.x}${marks}`
      : `${this.title}: no samples yet`);
  }

  draw() {
    const c = this.canvas;
    const w = c.clientWidth;
    const hgt = c.clientHeight;
    if (!w || !hgt) return;
    const dpr = window.devicePixelRatio || 1;
    if (c.width !== Math.round(w * dpr) || c.height !== Math.round(hgt * dpr)) {
      c.width = Math.round(w * dpr);
      c.height = Math.round(hgt * dpr);
    }
    const g = c.getContext('2d');
    g.setTransform(dpr, 0, 0, dpr, 0, 0);
    g.clearRect(0, 0, w, hgt);
    const style = getComputedStyle(c);
    const ink = style.getPropertyValue('--chart-ink').trim() || '#555';
    const grid = style.getPropertyValue('--chart-grid').trim() || '#ddd';
    g.font = '11px system-ui, sans-serif';
    const pad = { l: 44, r: 10, t: 8, b: 20 };
    const pw = w - pad.l - pad.r;
    const ph = hgt - pad.t - pad.b;
    const pts = this.points;
    if (pts.length === 0) {
      g.fillStyle = ink;
      g.textAlign = 'center';
      g.fillText('waiting for progress samples…', w / 2, hgt / 2);
      return;
    }
    let x0 = pts[0].x;
    let x1 = pts[pts.length - 1].x;
    if (x1 === x0) x1 = x0 + 1;
    let y0 = Math.min(...pts.map((p) => p.y));
    let y1 = Math.max(...pts.map((p) => p.y));
    if (y1 === y0) {
      const d = Math.abs(y0) * 0.1 || 1;
      y0 -= d;
      y1 += d;
    }
    const X = (x) => pad.l + ((x - x0) / (x1 - x0)) * pw;
    const Y = (y) => pad.t + (1 - (y - y0) / (y1 - y0)) * ph;

    // Grid and labels: three horizontal lines, first and last step.
    g.strokeStyle = grid;
    g.fillStyle = ink;
    g.lineWidth = 1;
    g.textAlign = 'right';
    g.textBaseline = 'middle';
    for (let i = 0; i <= 2; i++) {
      const v = y0 + ((y1 - y0) * i) / 2;
      const y = Math.round(Y(v)) + 0.5;
      g.beginPath();
      g.moveTo(pad.l, y);
      g.lineTo(pad.l + pw, y);
      g.stroke();
      g.fillText(fmtNumber(v, 3), pad.l - 4, y);
    }
    g.textBaseline = 'top';
    g.textAlign = 'left';
    g.fillText(`step ${pts[0].x}`, pad.l, pad.t + ph + 5);
    g.textAlign = 'right';
    g.fillText(`step ${pts[pts.length - 1].x}`, pad.l + pw, pad.t + ph + 5);

    // Recoveries: a dashed line where each later attempt begins.
    g.save();
    g.strokeStyle = this.markerColor;
    g.fillStyle = this.markerColor;
    g.setLineDash([4, 3]);
    g.textAlign = 'left';
    g.textBaseline = 'top';
    for (const m of placeMarkers(this.markers, { x0, x1, left: pad.l, width: pw })) {
      const x = Math.round(m.x) + 0.5;
      g.beginPath();
      g.moveTo(x, pad.t);
      g.lineTo(x, pad.t + ph);
      g.stroke();
      g.fillText(`↻ ${m.attempt ?? ''}`.trim(), Math.min(x + 3, pad.l + pw - 24), pad.t + 2 + m.row * 12);
    }
    g.restore();

    g.strokeStyle = this.color;
    g.lineWidth = 2;
    g.lineJoin = 'round';
    g.beginPath();
    pts.forEach((p, i) => (i ? g.lineTo(X(p.x), Y(p.y)) : g.moveTo(X(p.x), Y(p.y))));
    g.stroke();
    if (pts.length === 1) {
      g.fillStyle = this.color;
      g.beginPath();
      g.arc(X(pts[0].x), Y(pts[0].y), 3, 0, Math.PI * 2);
      g.fill();
    }
  }
}
