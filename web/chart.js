// chart.js — line charts on a canvas: several series, linear or log y, hover read-out,
// drag across to zoom into an x range, double-click to zoom back out.
// After each draw the canvas carries what it drew, for tests to read back: canvas.__series, one
// {name, xs, ys, py} per series (the points' data values and their pixel rows), and
// canvas.__yTicks, the values the y axis labels.
'use strict';

(function () {
  const PAD = { l: 58, r: 12, t: 10, b: 26 };

  function css(el, name, dflt) {
    const v = getComputedStyle(el).getPropertyValue(name).trim();
    return v || dflt;
  }

  // About n round numbers covering [lo, hi].
  function niceTicks(lo, hi, n) {
    if (!(hi > lo)) return [lo];
    const raw = (hi - lo) / n;
    const mag = Math.pow(10, Math.floor(Math.log10(raw)));
    const step = [1, 2, 5, 10].map(k => k * mag).find(s => s >= raw) || 10 * mag;
    const out = [];
    for (let v = Math.ceil(lo / step) * step; v <= hi + step * 1e-9; v += step) out.push(Math.abs(v) < step * 1e-9 ? 0 : v);
    return out;
  }

  // Ticks of a log axis over [lo, hi] (in decades), as their log10: whole decades where two or
  // more fit, else 1, 2 and 5 times a power of ten, else round numbers of the linear scale.
  function logTicks(lo, hi) {
    const decades = niceTicks(Math.ceil(lo), Math.floor(hi), 5).filter(Number.isInteger);
    if (decades.length >= 2) return decades;
    const out = [];
    for (let k = Math.floor(lo); k <= Math.ceil(hi); k++) {
      for (const m of [1, 2, 5]) if (k + Math.log10(m) >= lo && k + Math.log10(m) <= hi) out.push(k + Math.log10(m));
    }
    if (out.length >= 2) return out;
    return niceTicks(Math.pow(10, lo), Math.pow(10, hi), 4).filter(v => v > 0).map(Math.log10);
  }

  function fmtNum(v) {
    if (v === null || v === undefined || !isFinite(v)) return '—';
    const a = Math.abs(v);
    if (a === 0) return '0';
    if (a >= 1e5 && a < 1e15) {   // 123k, 4.5M: shorter than 1.23e+5 on an axis
      const k = Math.floor(Math.log10(a) / 3);
      return String(+(v / Math.pow(1000, k)).toPrecision(3)) + ' kMGT'[k];
    }
    if (a >= 1e15 || a < 1e-3) return v.toExponential(2).replace(/\.?0+e/, 'e');   // 1e-4, 1.5e-4
    if (a >= 100) return v.toFixed(0);
    return String(+v.toPrecision(4));
  }

  function fmtDuration(s) {
    if (!isFinite(s)) return '—';
    const sign = s < 0 ? '-' : '';
    s = Math.abs(s);
    if (s < 60) return sign + (+s.toPrecision(3)) + 's';
    if (s < 3600) return sign + Math.floor(s / 60) + 'm' + String(Math.round(s % 60)).padStart(2, '0') + 's';
    return sign + Math.floor(s / 3600) + 'h' + String(Math.floor((s % 3600) / 60)).padStart(2, '0') + 'm';
  }

  // Index of the last x <= v in the ascending xs (or 0).
  function bisect(xs, v) {
    let lo = 0, hi = xs.length - 1;
    while (lo < hi) {
      const mid = (lo + hi + 1) >> 1;
      if (xs[mid] <= v) lo = mid; else hi = mid - 1;
    }
    return lo;
  }

  class LineChart {
    // opts: {xFormat: fn(x) -> string, onZoom: fn([x0, x1] or null),
    //        onHover: fn(lines or null): the read-out as text, for a screen reader or a test}
    constructor(canvas, opts) {
      this.c = canvas;
      this.opts = opts || {};
      this.series = [];       // {name, color, xs, ys, dashed, faint}
      this.log = false;
      this.zoom = null;       // [x0, x1] or null: everything
      this.hoverPx = null;
      this.drag = null;
      // Pointer events: a finger drags to zoom as a mouse does (style.css gives it touch-action).
      canvas.addEventListener('pointermove', e => this.onMove(e));
      canvas.addEventListener('pointerleave', () => {
        this.hoverPx = null;
        this.drag = null;
        this.draw();
        if (this.opts.onHover) this.opts.onHover(null);
      });
      canvas.addEventListener('pointerdown', e => {
        canvas.setPointerCapture(e.pointerId);
        this.drag = { a: this.px(e), b: this.px(e) };
      });
      canvas.addEventListener('pointerup', e => this.onUp(e));
      canvas.addEventListener('dblclick', () => this.setZoom(null, true));
      // From the keyboard: arrows move the read-out (shift: further), Escape zooms out.
      canvas.addEventListener('keydown', e => this.onKey(e));
      canvas.addEventListener('blur', () => {
        this.hoverPx = null;
        this.draw();
        if (this.opts.onHover) this.opts.onHover(null);
      });
      if (window.ResizeObserver) new ResizeObserver(() => this.draw()).observe(canvas);
    }

    setSeries(series) { this.series = series; this.draw(); }
    setLog(on) { this.log = on; this.draw(); }
    setZoom(range, tell) {
      this.zoom = range;
      this.draw();
      if (tell && this.opts.onZoom) this.opts.onZoom(range);
    }

    px(e) { return e.clientX - this.c.getBoundingClientRect().left; }

    onMove(e) {
      this.hoverPx = this.px(e);
      if (this.drag) this.drag.b = this.hoverPx;
      this.draw();
      if (this.opts.onHover) this.opts.onHover(this.readout);
    }

    onKey(e) {
      const W = this.c.clientWidth, step = (W - PAD.l - PAD.r) / (e.shiftKey ? 10 : 50);
      if (e.key === 'Escape') {
        this.setZoom(null, true);
        return;
      }
      if (e.key !== 'ArrowLeft' && e.key !== 'ArrowRight') return;
      e.preventDefault();
      const p = this.hoverPx === null ? PAD.l : this.hoverPx + (e.key === 'ArrowLeft' ? -step : step);
      this.hoverPx = Math.min(W - PAD.r, Math.max(PAD.l, p));
      this.draw();
      if (this.opts.onHover) this.opts.onHover(this.readout);
    }

    onUp() {
      const d = this.drag;
      this.drag = null;
      if (d && Math.abs(d.a - d.b) > 4 && this.frame) {
        const x0 = this.frame.xAt(Math.min(d.a, d.b)), x1 = this.frame.xAt(Math.max(d.a, d.b));
        this.setZoom([x0, x1], true);
      } else {
        this.draw();
      }
    }

    ok(y) { return y !== null && isFinite(y) && (!this.log || y > 0); }

    ranges() {
      let x0 = Infinity, x1 = -Infinity;
      for (const s of this.series) {
        if (!s.xs.length) continue;
        x0 = Math.min(x0, s.xs[0]);
        x1 = Math.max(x1, s.xs[s.xs.length - 1]);
      }
      if (this.zoom) [x0, x1] = this.zoom;
      let y0 = Infinity, y1 = -Infinity;
      for (const s of this.series) {
        for (let i = 0; i < s.xs.length; i++) {
          const x = s.xs[i], y = s.ys[i];
          if (x < x0 || x > x1 || !this.ok(y)) continue;
          const v = this.log ? Math.log10(y) : y;
          if (v < y0) y0 = v;
          if (v > y1) y1 = v;
        }
      }
      if (!isFinite(x0)) return null;
      if (x1 === x0) x1 = x0 + 1;
      if (!isFinite(y0)) { y0 = 0; y1 = 1; }
      // A flat series (a constant lr, smoothed: equal but for rounding) is drawn flat, not as
      // its rounding blown up to the chart's height.
      const mag = Math.max(Math.abs(y0), Math.abs(y1));
      if (y1 - y0 <= 1e-9 * mag || y1 === y0) {
        const h = mag ? 0.05 * mag : 0.5;
        y0 -= h;
        y1 += h;
      }
      const pad = (y1 - y0) * 0.05;
      return { x0, x1, y0: y0 - pad, y1: y1 + pad };
    }

    draw() {
      const c = this.c, dpr = window.devicePixelRatio || 1;
      const W = c.clientWidth, H = c.clientHeight;
      if (!W || !H) return;
      if (c.width !== Math.round(W * dpr) || c.height !== Math.round(H * dpr)) {
        c.width = Math.round(W * dpr);
        c.height = Math.round(H * dpr);
      }
      const g = c.getContext('2d');
      g.setTransform(dpr, 0, 0, dpr, 0, 0);
      g.clearRect(0, 0, W, H);
      const fg = css(c, '--fg', '#222'), grid = css(c, '--grid', '#ddd'), muted = css(c, '--muted', '#777');
      c.__grid = grid;
      g.font = '11px system-ui, sans-serif';
      const r = this.ranges();
      this.readout = null;
      if (!r) {
        g.fillStyle = muted;
        g.fillText('no data yet', W / 2 - 30, H / 2);
        this.frame = null;
        c.__series = [];
        c.__yTicks = [];
        return;
      }
      const pw = W - PAD.l - PAD.r, ph = H - PAD.t - PAD.b;
      const X = x => PAD.l + pw * (x - r.x0) / (r.x1 - r.x0);
      const Y = v => PAD.t + ph - ph * (v - r.y0) / (r.y1 - r.y0);
      this.frame = { xAt: p => r.x0 + (p - PAD.l) / pw * (r.x1 - r.x0) };

      // Grid and axes.
      g.strokeStyle = grid;
      g.fillStyle = muted;
      g.lineWidth = 1;
      g.beginPath();
      const yt = this.log ? logTicks(r.y0, r.y1) : niceTicks(r.y0, r.y1, 5);
      c.__yTicks = yt.map(v => this.log ? Math.pow(10, v) : v);
      g.textAlign = 'right';
      for (const v of yt) {
        const y = Math.round(Y(v)) + 0.5;
        g.moveTo(PAD.l, y); g.lineTo(W - PAD.r, y);
        g.fillText(fmtNum(this.log ? Math.pow(10, v) : v), PAD.l - 4, y + 4);
      }
      const xf = this.opts.xFormat || fmtNum;
      g.textAlign = 'center';
      for (const v of niceTicks(r.x0, r.x1, Math.max(2, Math.floor(pw / 90)))) {
        const x = Math.round(X(v)) + 0.5;
        g.moveTo(x, PAD.t); g.lineTo(x, PAD.t + ph);
        g.fillText(xf(v), x, H - 8);
      }
      g.stroke();

      // Series, clipped to the plot.
      g.save();
      g.beginPath();
      g.rect(PAD.l, PAD.t, pw, ph);
      g.clip();
      const drawn = [];
      for (const s of this.series) {
        const d = { name: s.name, xs: [], ys: [], py: [] };
        drawn.push(d);
        g.strokeStyle = s.color;
        g.globalAlpha = s.faint ? 0.25 : 1;
        g.lineWidth = s.faint ? 1 : 1.6;
        g.setLineDash(s.dashed ? [5, 3] : []);
        g.beginPath();
        let pen = false;
        const i0 = Math.max(0, bisect(s.xs, r.x0) - 1);
        for (let i = i0; i < s.xs.length; i++) {
          const y = s.ys[i];
          if (!this.ok(y)) { pen = false; continue; }
          const px = X(s.xs[i]), py = Y(this.log ? Math.log10(y) : y);
          if (pen) g.lineTo(px, py); else g.moveTo(px, py);
          pen = true;
          d.xs.push(s.xs[i]); d.ys.push(y); d.py.push(py);
          if (s.xs[i] > r.x1) break;
        }
        g.stroke();
      }
      g.restore();
      c.__series = drawn;
      g.globalAlpha = 1;
      g.setLineDash([]);

      // Drag selection.
      if (this.drag && Math.abs(this.drag.a - this.drag.b) > 1) {
        g.fillStyle = css(c, '--sel', 'rgba(80,130,255,.18)');
        g.fillRect(Math.min(this.drag.a, this.drag.b), PAD.t, Math.abs(this.drag.a - this.drag.b), ph);
      }

      // Hover read-out: each series' nearest point at or before the cursor.
      const hp = this.hoverPx;
      if (hp === null || hp < PAD.l || hp > W - PAD.r) return;
      const xv = this.frame.xAt(hp);
      const lines = [xf(xv)];   // the first series' point's x, once one is found
      const colors = [fg];
      let named = false;
      g.strokeStyle = muted;
      g.beginPath(); g.moveTo(hp + 0.5, PAD.t); g.lineTo(hp + 0.5, PAD.t + ph); g.stroke();
      for (const s of this.series) {
        if (!s.xs.length || s.faint) continue;
        const i = bisect(s.xs, xv);
        const y = s.ys[i];
        if (!named) { lines[0] = xf(s.xs[i]); named = true; }
        lines.push(s.name + ': ' + fmtNum(y));
        colors.push(s.color);
        if (this.ok(y)) {
          g.fillStyle = s.color;
          g.beginPath(); g.arc(X(s.xs[i]), Y(this.log ? Math.log10(y) : y), 3, 0, 2 * Math.PI); g.fill();
        }
      }
      g.textAlign = 'left';
      const tw = Math.max(...lines.map(t => g.measureText(t).width)) + 12, th = lines.length * 14 + 6;
      const tx = hp + tw + 12 > W ? hp - tw - 8 : hp + 8;
      g.fillStyle = css(c, '--tip', 'rgba(255,255,255,.92)');
      g.strokeStyle = grid;
      g.fillRect(tx, PAD.t, tw, th);
      g.strokeRect(tx + 0.5, PAD.t + 0.5, tw, th);
      lines.forEach((t, k) => { g.fillStyle = colors[k]; g.fillText(t, tx + 6, PAD.t + 15 + 14 * k); });
      this.readout = lines;
    }
  }

  window.LineChart = LineChart;
  window.chartFormat = { num: fmtNum, duration: fmtDuration };
})();
