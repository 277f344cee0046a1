// Cluster page: every node with its health and devices (GET /api/v1/nodes).

import { api } from '../api.js';
import { h, fill, badge, fmtBytes, fmtNumber, fmtFlops, fmtAgo, progressBar } from '../util.js';

function deviceCard(d) {
  const memFrac = d.memory_bytes ? Number(d.memory_used_bytes || 0) / Number(d.memory_bytes) : NaN;
  const util = Number(d.utilization);
  const utilFrac = Number.isFinite(util) ? (util > 1 ? util / 100 : util) : NaN;
  const id = `${d.node}:${d.index}`;
  return h('li', { class: 'device', 'data-device': id },
    h('div', { class: 'device-head' },
      h('span', { class: 'device-name' }, d.name || '(unnamed)'),
      h('span', { class: 'badges' },
        badge(d.type || '?', 'type'),
        d.emulated ? badge('emulated') : null,
        d.busy ? badge('busy') : badge('idle'))),
    h('div', { class: 'muted device-id' }, id, d.compute_capability ? ` · sm ${d.compute_capability}` : ''),
    h('dl', { class: 'kv' },
      h('dt', {}, 'Memory'),
      h('dd', {}, `${fmtBytes(d.memory_used_bytes || 0)} / ${fmtBytes(d.memory_bytes)}`,
        progressBar(memFrac, `${id} memory used`)),
      h('dt', {}, 'Speed'),
      h('dd', {}, d.measured_tflops ? `${fmtFlops(d.measured_tflops)} measured`
                                    + (d.measured_tflops_half ? ` (${fmtFlops(d.measured_tflops_half)} fp16/bf16)` : '')
                                    : 'not measured',
        d.relative_speed ? h('span', { class: 'muted' }, ` · ×${fmtNumber(d.relative_speed, 2)}`) : null),
      h('dt', {}, 'Utilization'),
      h('dd', {}, Number.isFinite(utilFrac) ? `${Math.round(utilFrac * 100)}%` : '–',
        progressBar(utilFrac, `${id} utilization`))));
}

// "0–1 NVLink ×4 · 0–2 across sockets": how the node's GPUs reach each other.
export function linkSummary(links = []) {
  const kinds = { nvlink: 'NVLink', pcie: 'PCIe', system: 'across sockets', unknown: 'unknown' };
  return links.map((l) => `${l.a}–${l.b} ${kinds[l.kind] || l.kind}` +
                          (l.kind === 'nvlink' && l.nvlink_count ? ` ×${l.nvlink_count}` : ''))
    .join(' · ');
}

function nodeCard(n, now) {
  const devices = n.devices || [];
  const links = linkSummary(n.links || []);
  return h('section', { class: 'card node', 'aria-labelledby': `node-${n.name}`,
                        'data-node': n.name },
    h('div', { class: 'node-head' },
      h('h2', { id: `node-${n.name}` }, n.name),
      badge(n.health || 'unknown')),
    h('p', { class: 'muted' }, n.address || 'no address',
      n.source === 'slurm' ? ' · Slurm node' : '',
      ` · last heartbeat ${fmtAgo(n.last_heartbeat_ms, now)}`,
      ` · ${devices.length} device${devices.length === 1 ? '' : 's'}`),
    links ? h('p', { class: 'muted links', 'aria-label': `Links of ${n.name}` }, `Links: ${links}`)
          : null,
    devices.length ? h('ul', { class: 'devices', 'aria-label': `Devices of ${n.name}` },
                       devices.map(deviceCard))
      : h('p', { class: 'muted' }, 'No devices reported.'));
}

export function mountCluster(main) {
  document.title = 'Cluster · Tessera';
  const summary = h('p', { class: 'summary', 'aria-live': 'polite' }, 'Loading nodes…');
  const list = h('div', { class: 'nodes' });
  fill(main, h('div', { class: 'page-head' }, h('h1', {}, 'Cluster'), summary), list);
  let lastKey = '';
  return {
    async tick() {
      const { nodes = [] } = await api.nodes();
      const now = Date.now();
      const healthy = nodes.filter((n) => n.health === 'healthy').length;
      const devices = nodes.reduce((a, n) => a + (n.devices || []).length, 0);
      const tflops = nodes.reduce((a, n) => a + (n.devices || []).reduce(
        (b, d) => b + (Number(d.measured_tflops) || 0), 0), 0);
      const text = nodes.length
        ? `${healthy} of ${nodes.length} nodes healthy · ${devices} devices · ` +
          `${fmtFlops(tflops)} measured in all`
        : 'No nodes have joined yet. Start tessera-agent on each machine.';
      if (summary.textContent !== text) summary.textContent = text;
      // Rebuild only when something changed, so focus and selection survive.
      const key = JSON.stringify(nodes.map((n) => [n.name, n.health, n.source, n.devices, n.links,
                                                   Math.floor((now - n.last_heartbeat_ms) / 1000)]));
      if (key === lastKey) return;
      lastKey = key;
      fill(list, nodes.map((n) => nodeCard(n, now)));
    },
  };
}
