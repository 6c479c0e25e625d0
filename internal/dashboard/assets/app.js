// The mizzen dashboard: plain JavaScript, no build step. Served by `mizzen dashboard` on
// its own port, every call goes to /k8s/..., which the dashboard passes to the apiserver
// with the logged-in user's token. Served by the apiserver at /ui/, every call goes to
// the apiserver's own REST paths on the same origin, authenticated by the browser's
// client certificate or by a token the page holds for this tab. Either way what the
// pages show and do is what RBAC allows that user.
'use strict';

// ---------- API access ----------

// IN_APISERVER: the page is the apiserver's /ui/. API is the prefix of the apiserver's
// REST paths, HELPERS that of the dashboard's server-side helpers (settings, proxy
// health, journeys).
const IN_APISERVER = location.pathname.startsWith('/ui/');
const API = IN_APISERVER ? '' : '/k8s';
const HELPERS = IN_APISERVER ? '/ui' : '';
const TOKEN_KEY = 'mizzen-dashboard-token';

// authHeaders are the credentials a call carries itself: at /ui/, a token the user gave
// this tab (none with a client certificate, which the browser presents on its own); on
// the dashboard's own port, none (the session cookie carries the token).
function authHeaders() {
  const token = IN_APISERVER ? sessionStorage.getItem(TOKEN_KEY) : null;
  return token ? { Authorization: 'Bearer ' + token } : {};
}

// loggedOut sends the user to log in: the login page of the dashboard's own port, or
// the token form at /ui/.
function loggedOut() {
  if (!IN_APISERVER) { location.href = '/login'; return; }
  sessionStorage.removeItem(TOKEN_KEY);
  showTokenForm('The apiserver did not authenticate this browser: it presented no client certificate the apiserver accepts, or the token was refused.');
}

// showTokenForm asks for a bearer token at /ui/, kept for this tab only (sessionStorage)
// and sent as an Authorization header, which another site's page cannot make the
// browser send.
function showTokenForm(message) {
  if (document.getElementById('token')) return;
  const token = h('textarea', { id: 'token', rows: '6', autocomplete: 'off', spellcheck: 'false' });
  const button = h('button', { type: 'submit', id: 'login-button' }, 'Log in');
  const form = h('form', { id: 'login-form', class: 'login' }, h('h1', {}, 'Log in'),
    h('p', { class: 'error', id: 'login-error' }, message),
    h('p', {}, 'Present a client certificate the apiserver trusts, or log in with a bearer token: every request is made as its user, and RBAC decides what you may see and do.'),
    h('label', { for: 'token' }, 'Token'), token, button);
  form.addEventListener('submit', ev => {
    ev.preventDefault();
    const t = token.value.trim().replace(/^Bearer\s+/, '');
    if (!t) return;
    sessionStorage.setItem(TOKEN_KEY, t);
    location.reload();
  });
  document.getElementById('main').replaceChildren(form);
}

function csrfToken() {
  const c = document.cookie.split('; ').find(c => c.startsWith('mizzen-dashboard-csrf='));
  return c ? c.slice(c.indexOf('=') + 1) : '';
}

class APIError extends Error {
  constructor(code, message) { super(message); this.code = code; }
}

async function request(path, opts = {}) {
  const headers = Object.assign({ Accept: 'application/json' }, opts.headers || {});
  const method = opts.method || 'GET';
  if (method !== 'GET' && !IN_APISERVER) headers['X-CSRF-Token'] = csrfToken();
  Object.assign(headers, authHeaders());
  const resp = await fetch((opts.base ?? API) + path, { method, headers, body: opts.body, signal: opts.signal, credentials: 'same-origin' });
  if (resp.status === 401) {
    loggedOut();
    throw new APIError(401, 'Unauthorized');
  }
  if (!resp.ok) {
    let msg = resp.status + ' ' + resp.statusText;
    try { const s = await resp.json(); if (s.message) msg = s.message; } catch (e) { /* not a Status */ }
    throw new APIError(resp.status, msg);
  }
  return resp;
}

async function api(path, opts) {
  const resp = await request(path, opts);
  const ct = resp.headers.get('Content-Type') || '';
  return ct.includes('json') ? resp.json() : resp.text();
}

// watch streams the watch events of a list path to onEvent until signal aborts,
// starting again (from a fresh list, through relist) when the stream ends.
async function watch(path, resourceVersion, onEvent, relist, signal) {
  let rv = resourceVersion;
  while (!signal.aborted) {
    try {
      const sep = path.includes('?') ? '&' : '?';
      const resp = await request(`${path}${sep}watch=1&allowWatchBookmarks=true&resourceVersion=${encodeURIComponent(rv)}`, { signal });
      for await (const line of lines(resp.body, signal)) {
        const ev = JSON.parse(line);
        if (ev.type === 'ERROR') { rv = await relist(); break; }
        if (ev.object && ev.object.metadata && ev.object.metadata.resourceVersion) rv = ev.object.metadata.resourceVersion;
        if (ev.type !== 'BOOKMARK') onEvent(ev);
      }
    } catch (e) {
      if (signal.aborted) return;
      await sleep(2000);
      try { rv = await relist(); } catch (e2) { /* try again */ }
    }
  }
}

async function* lines(body, signal) {
  const reader = body.getReader();
  const dec = new TextDecoder();
  let buf = '';
  signal.addEventListener('abort', () => reader.cancel().catch(() => {}));
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    buf += dec.decode(value, { stream: true });
    let i;
    while ((i = buf.indexOf('\n')) >= 0) {
      const line = buf.slice(0, i).trim();
      buf = buf.slice(i + 1);
      if (line) yield line;
    }
  }
}

const sleep = ms => new Promise(r => setTimeout(r, ms));

// untilNotLost calls load until it answers or is refused: a request lost to the
// network (the browser abandons requests in flight when the host's network changes)
// or to a server error (5xx) is tried again every two seconds; a refusal (4xx)
// stands, for the caller to show.
async function untilNotLost(load, signal) {
  for (;;) {
    try {
      return await load();
    } catch (e) {
      if (signal.aborted || (e instanceof APIError && e.code < 500)) throw e;
      await sleep(2000);
    }
  }
}

// getNotLost is api's GET of path, tried again while lost (see untilNotLost).
const getNotLost = (path, signal) => untilNotLost(() => api(path, { signal }), signal);

// loadScript loads a script again that the page's own tag lost (see untilNotLost),
// tried until it loads or signal aborts.
async function loadScript(src, signal) {
  for (;;) {
    const loaded = await new Promise(resolve => {
      const tag = document.createElement('script');
      tag.src = src;
      tag.onload = () => resolve(true);
      tag.onerror = () => { tag.remove(); resolve(false); };
      document.head.append(tag);
    });
    if (loaded || signal.aborted) return;
    await sleep(2000);
  }
}

// ---------- the resources the pages know ----------

const BUILTIN = [
  { key: 'nodes', group: '', version: 'v1', resource: 'nodes', kind: 'Node', namespaced: false },
  { key: 'namespaces', group: '', version: 'v1', resource: 'namespaces', kind: 'Namespace', namespaced: false },
  { key: 'deployments', group: 'apps', version: 'v1', resource: 'deployments', kind: 'Deployment', namespaced: true, scale: true, restart: true },
  { key: 'replicasets', group: 'apps', version: 'v1', resource: 'replicasets', kind: 'ReplicaSet', namespaced: true, scale: true },
  { key: 'statefulsets', group: 'apps', version: 'v1', resource: 'statefulsets', kind: 'StatefulSet', namespaced: true, scale: true, restart: true },
  { key: 'daemonsets', group: 'apps', version: 'v1', resource: 'daemonsets', kind: 'DaemonSet', namespaced: true, restart: true },
  { key: 'jobs', group: 'batch', version: 'v1', resource: 'jobs', kind: 'Job', namespaced: true },
  { key: 'cronjobs', group: 'batch', version: 'v1', resource: 'cronjobs', kind: 'CronJob', namespaced: true },
  { key: 'pods', group: '', version: 'v1', resource: 'pods', kind: 'Pod', namespaced: true },
  { key: 'services', group: '', version: 'v1', resource: 'services', kind: 'Service', namespaced: true },
  { key: 'ingresses', group: 'networking.k8s.io', version: 'v1', resource: 'ingresses', kind: 'Ingress', namespaced: true },
  { key: 'configmaps', group: '', version: 'v1', resource: 'configmaps', kind: 'ConfigMap', namespaced: true },
  { key: 'events', group: '', version: 'v1', resource: 'events', kind: 'Event', namespaced: true },
];
// Groups served by the apiserver itself or its aggregated add-ons: whatever else
// discovery lists is a custom resource.
const BUILTIN_GROUPS = new Set(['', 'apps', 'batch', 'autoscaling', 'policy', 'networking.k8s.io', 'rbac.authorization.k8s.io',
  'storage.k8s.io', 'scheduling.k8s.io', 'coordination.k8s.io', 'discovery.k8s.io', 'events.k8s.io', 'node.k8s.io',
  'admissionregistration.k8s.io', 'apiregistration.k8s.io', 'certificates.k8s.io', 'authentication.k8s.io',
  'authorization.k8s.io', 'apiextensions.k8s.io', 'flowcontrol.apiserver.k8s.io', 'metrics.k8s.io', 'resource.k8s.io',
  'storagemigration.k8s.io', 'internal.apiserver.k8s.io']);

const resources = new Map(BUILTIN.map(r => [r.key, r]));
const byKind = new Map(BUILTIN.map(r => [`${r.group}/${r.kind}`, r]));

function base(r) { return r.group ? `/apis/${r.group}/${r.version}` : `/api/${r.version}`; }
function listPath(r, ns) { return base(r) + (r.namespaced && ns ? `/namespaces/${encodeURIComponent(ns)}` : '') + '/' + r.resource; }
function objPath(r, ns, name) { return listPath(r, ns) + '/' + encodeURIComponent(name); }
function objHash(r, ns, name) { return `#/obj/${r.key}/${encodeURIComponent(ns || '_')}/${encodeURIComponent(name)}`; }
function resourceForRef(apiVersion, kind) {
  const group = apiVersion.includes('/') ? apiVersion.split('/')[0] : '';
  return byKind.get(`${group}/${kind}`);
}

// discoverCustom adds the resources of groups discovery lists beyond the built-in ones.
async function discoverCustom() {
  let groups;
  try { groups = await api('/apis'); } catch (e) { return []; }
  const found = [];
  for (const g of groups.groups || []) {
    if (BUILTIN_GROUPS.has(g.name)) continue;
    const gv = g.preferredVersion.groupVersion;
    let list;
    try { list = await api(`/apis/${gv}`); } catch (e) { continue; }
    for (const res of list.resources || []) {
      if (res.name.includes('/') || !(res.verbs || []).includes('list')) continue;
      const r = { key: `${res.name}.${g.name}`, group: g.name, version: gv.split('/')[1], resource: res.name, kind: res.kind, namespaced: res.namespaced, custom: true };
      resources.set(r.key, r);
      byKind.set(`${r.group}/${r.kind}`, r);
      found.push(r);
    }
  }
  return found;
}

// ---------- small DOM helpers (text only: nothing from the API becomes markup) ----------

function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v == null || v === false) continue;
    if (k.startsWith('on')) el.addEventListener(k.slice(2), v);
    else el.setAttribute(k, v === true ? '' : v);
  }
  for (const c of children.flat()) if (c != null) el.append(c instanceof Node ? c : String(c));
  return el;
}

function showError(msg) {
  const el = document.getElementById('error');
  el.textContent = msg;
  el.hidden = !msg;
}

function currentNamespace() { return document.getElementById('namespace').value.trim(); }

// ask shows the dialog and resolves to the input (or true for a confirmation), or null.
function ask(text, defaultValue) {
  const dlg = document.getElementById('dialog');
  const input = document.getElementById('dialog-input');
  document.getElementById('dialog-text').textContent = text;
  input.hidden = defaultValue === undefined;
  input.value = defaultValue === undefined ? '' : String(defaultValue);
  dlg.hidden = false;
  if (!input.hidden) input.focus();
  return new Promise(resolve => {
    const done = v => {
      dlg.hidden = true;
      form.removeEventListener('submit', ok);
      cancel.removeEventListener('click', no);
      resolve(v);
    };
    const form = document.getElementById('dialog-form');
    const cancel = document.getElementById('dialog-cancel');
    const ok = e => { e.preventDefault(); done(input.hidden ? true : input.value); };
    const no = () => done(null);
    form.addEventListener('submit', ok);
    cancel.addEventListener('click', no);
  });
}

function age(ts) {
  if (!ts) return '';
  const s = Math.max(0, (Date.now() - new Date(ts).getTime()) / 1000);
  if (s < 120) return `${Math.floor(s)}s`;
  if (s < 7200) return `${Math.floor(s / 60)}m`;
  if (s < 172800) return `${Math.floor(s / 3600)}h`;
  return `${Math.floor(s / 86400)}d`;
}

// ---------- YAML: the pages write it; the apiserver reads it (apply-patch+yaml) ----------

function yamlScalar(v) {
  if (v === null || v === undefined) return 'null';
  if (typeof v === 'boolean' || typeof v === 'number') return String(v);
  const s = String(v);
  if (s === '' || /^[\s\-?:,\[\]{}#&*!|>'"%@`~]|[\s]$|: | #|[\n\r\t\u0000-\u001f]/.test(s) ||
      /^(true|false|yes|no|on|off|null|y|n|~)$/i.test(s) || /^[-+.]?\d/.test(s) || /^0x/i.test(s) || s === '.inf' || s === '.nan') {
    return JSON.stringify(s);
  }
  return s;
}
function isObject(v) { return v !== null && typeof v === 'object' && !Array.isArray(v); }
function yamlLines(v, ind, out) {
  for (const [k, val] of Object.entries(v)) {
    const key = yamlScalar(k);
    if (Array.isArray(val)) {
      if (!val.length) out.push(`${ind}${key}: []`);
      else { out.push(`${ind}${key}:`); yamlArray(val, ind + '  ', out); }
    } else if (isObject(val)) {
      if (!Object.keys(val).length) out.push(`${ind}${key}: {}`);
      else { out.push(`${ind}${key}:`); yamlLines(val, ind + '  ', out); }
    } else out.push(`${ind}${key}: ${yamlScalar(val)}`);
  }
}
function yamlArray(arr, ind, out) {
  for (const item of arr) {
    if (isObject(item) && Object.keys(item).length) {
      const sub = [];
      yamlLines(item, ind + '  ', sub);
      sub[0] = ind + '- ' + sub[0].slice(ind.length + 2);
      out.push(...sub);
    } else if (Array.isArray(item) && item.length) {
      out.push(`${ind}-`);
      yamlArray(item, ind + '  ', out);
    } else if (isObject(item)) out.push(`${ind}- {}`);
    else if (Array.isArray(item)) out.push(`${ind}- []`);
    else out.push(`${ind}- ${yamlScalar(item)}`);
  }
}
function toYAML(obj) { const out = []; yamlLines(obj, '', out); return out.join('\n') + '\n'; }

// manifest is what the editor holds: the object as one would apply it, without what
// the server owns (status, managedFields, resourceVersion, uid, ...).
function manifest(obj) {
  const m = JSON.parse(JSON.stringify(obj));
  delete m.status;
  for (const k of ['managedFields', 'resourceVersion', 'uid', 'creationTimestamp', 'generation', 'selfLink', 'deletionTimestamp', 'deletionGracePeriodSeconds']) delete m.metadata[k];
  return m;
}

// ---------- routing ----------

let page = new AbortController(); // aborts the watches and streams of the page shown

function route() {
  page.abort();
  page = new AbortController();
  showError('');
  const [path, query] = location.hash.slice(1).split('?');
  const params = new URLSearchParams(query || '');
  const parts = path.split('/').filter(Boolean).map(decodeURIComponent);
  const main = document.getElementById('main');
  main.replaceChildren();
  for (const a of document.querySelectorAll('nav a')) a.classList.toggle('active', a.getAttribute('href') === '#' + path);
  const signal = page.signal;
  let shown;
  switch (parts[0]) {
    case 'list': shown = showList(main, resources.get(parts[1]), signal); break;
    case 'obj': shown = showObject(main, resources.get(parts[1]), parts[2] === '_' ? '' : parts[2], parts[3], signal); break;
    case 'logs': shown = showLogs(main, parts[1], parts[2], params.get('container'), signal); break;
    case 'exec': shown = showTerminal(main, parts[1], parts[2], params.get('container'), signal); break;
    default: shown = showOverview(main, signal);
  }
  Promise.resolve(shown).catch(e => { if (!signal.aborted) showError(e.message); });
}

// ---------- lists ----------

async function showList(main, r, signal) {
  if (!r) throw new Error('unknown resource');
  const ns = r.namespaced ? currentNamespace() : '';
  const title = h('h1', {}, r.resource, r.namespaced ? h('span', { class: 'muted' }, ' in ', ns || 'all namespaces') : '');
  const count = h('p', { id: 'count', class: 'muted' });
  const table = h('table', { id: 'list' });
  main.append(title, count, table);
  const path = listPath(r, ns);
  const load = async () => {
    const t = await api(path, { headers: { Accept: 'application/json;as=Table;v=v1;g=meta.k8s.io, application/json' }, signal });
    renderTable(table, r, t, !ns && r.namespaced);
    count.textContent = `${(t.rows || []).length} ${r.resource}`;
    return t.metadata.resourceVersion;
  };
  const rv = await untilNotLost(load, signal);
  let pending = null;
  // Any change re-reads the table, at most a few times a second, so its columns stay
  // the apiserver's own.
  const changed = () => { if (!pending) pending = setTimeout(() => { pending = null; load().catch(e => showError(e.message)); }, 250); };
  watch(path, rv, changed, load, signal);
}

function renderTable(table, r, t, withNamespace) {
  const cols = (t.columnDefinitions || []).map((c, i) => ({ ...c, i })).filter(c => !c.priority);
  const head = h('tr', {}, withNamespace ? h('th', {}, 'Namespace') : null, cols.map(c => h('th', {}, c.name)));
  const rows = (t.rows || []).map(row => {
    const md = (row.object && row.object.metadata) || {};
    return h('tr', { 'data-name': md.name, 'data-namespace': md.namespace || '' },
      withNamespace ? h('td', {}, md.namespace || '') : null,
      cols.map(c => {
        const v = row.cells[c.i];
        if (c.name === 'Name' && md.name) return h('td', {}, h('a', { href: objHash(r, md.namespace, md.name) }, v));
        return h('td', {}, v == null ? '' : typeof v === 'object' ? JSON.stringify(v) : v);
      }));
  });
  table.replaceChildren(h('thead', {}, head), h('tbody', {}, rows));
}

// ---------- one object ----------

async function showObject(main, r, ns, name, signal) {
  if (!r) throw new Error('unknown resource');
  const path = objPath(r, ns, name);
  const header = h('h1', {}, r.kind + ' ', h('span', { id: 'object-name' }, name), ns ? h('span', { class: 'muted' }, ' in ' + ns) : '');
  const actions = h('div', { class: 'actions' });
  const editor = h('textarea', { class: 'yaml', id: 'yaml', spellcheck: 'false', wrap: 'off' });
  const force = h('input', { type: 'checkbox', id: 'apply-force' });
  const applyButton = h('button', { id: 'apply', class: 'primary', type: 'button' }, 'Apply');
  const statusBlock = h('pre', { id: 'status' });
  const owners = h('ul', { id: 'owners' });
  const owned = h('ul', { id: 'owned' });
  const events = h('table', { id: 'events' });
  const journey = journeyKinds[r.kind] ? h('div', { id: 'journey' }) : null;
  main.append(header, actions,
    ...(journey ? [h('h2', {}, journeyKinds[r.kind].title), journey] : []),
    h('h2', {}, 'Owners'), owners, h('h2', {}, 'Owned objects'), owned,
    h('h2', {}, 'Events'), events,
    h('h2', {}, 'YAML'), editor,
    h('div', { class: 'actions' }, applyButton, h('label', {}, force, ' force (take fields other managers own)'),
      h('span', { class: 'muted' }, 'applied server-side as you, field manager mizzen-dashboard')),
    h('h2', {}, 'Status'), statusBlock);
  // The first fetch, lost to the network, is tried again (a 4xx, such as a 404 for a
  // deleted object, still shows at once): otherwise the page would show "Failed to
  // fetch" until a reload.
  let obj = await getNotLost(path, signal);
  let dirty = false;
  editor.addEventListener('input', () => { dirty = true; });

  const act = (label, attrs, fn) => actions.append(h('button', Object.assign({ type: 'button' }, attrs, {
    onclick: async () => { showError(''); try { await fn(); } catch (e) { showError(e.message); } },
  }), label));
  if (r.kind === 'Pod') {
    const containers = obj.spec.containers.map(c => c.name);
    act('Logs', { id: 'action-logs' }, async () => { location.hash = `#/logs/${encodeURIComponent(ns)}/${encodeURIComponent(name)}?container=${encodeURIComponent(containers[0])}`; });
    act('Terminal', { id: 'action-exec' }, async () => { location.hash = `#/exec/${encodeURIComponent(ns)}/${encodeURIComponent(name)}?container=${encodeURIComponent(containers[0])}`; });
  }
  if (r.scale) {
    act('Scale', { id: 'action-scale' }, async () => {
      const n = await ask(`Replicas of ${r.kind} ${name}:`, obj.spec.replicas);
      if (n === null) return;
      if (!/^\d+$/.test(n.trim())) throw new Error(`replicas must be a whole number, not ${JSON.stringify(n)}`);
      await api(path + '/scale', { method: 'PATCH', headers: { 'Content-Type': 'application/merge-patch+json' }, body: JSON.stringify({ spec: { replicas: Number(n) } }) });
    });
  }
  if (r.restart) {
    act('Restart', { id: 'action-restart' }, async () => {
      if (!await ask(`Restart every pod of ${r.kind} ${name} (rollout restart)?`)) return;
      const patch = { spec: { template: { metadata: { annotations: { 'kubectl.kubernetes.io/restartedAt': new Date().toISOString() } } } } };
      await api(path + '?fieldManager=mizzen-dashboard', { method: 'PATCH', headers: { 'Content-Type': 'application/strategic-merge-patch+json' }, body: JSON.stringify(patch) });
    });
  }
  act('Delete', { id: 'action-delete', class: 'danger' }, async () => {
    if (!await ask(`Delete ${r.kind} ${ns ? ns + '/' : ''}${name}?`)) return;
    await api(path, { method: 'DELETE', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ kind: 'DeleteOptions', apiVersion: 'v1', propagationPolicy: 'Background' }) });
    location.hash = `#/list/${r.key}`;
  });
  applyButton.addEventListener('click', async () => {
    showError('');
    try {
      const q = `?fieldManager=mizzen-dashboard${force.checked ? '&force=true' : ''}`;
      obj = await api(path + q, { method: 'PATCH', headers: { 'Content-Type': 'application/apply-patch+yaml' }, body: editor.value });
      dirty = false;
      render();
    } catch (e) { showError(e.message); }
  });

  const showJourney = journey ? throttled(() => journeyKinds[r.kind].load(journey, ns, name, signal).catch(e => { if (!signal.aborted) showError(e.message); })) : () => {};
  const render = () => {
    showJourney();
    if (!dirty) editor.value = toYAML(manifest(obj));
    statusBlock.textContent = obj.status ? toYAML(obj.status) : '(none)';
    owners.replaceChildren(...(obj.metadata.ownerReferences || []).map(ref => {
      const or = resourceForRef(ref.apiVersion, ref.kind);
      return h('li', {}, or ? h('a', { href: objHash(or, ns, ref.name) }, `${ref.kind} ${ref.name}`) : `${ref.kind} ${ref.name}`, ref.controller ? ' (controller)' : '');
    }));
    if (!owners.children.length) owners.append(h('li', { class: 'muted' }, 'none'));
  };
  render();

  // Each watch event starts a load while earlier ones may still be in flight: only the
  // latest renders (an older one stops at its next answer), so that one finishing last
  // does not put back the stale lists it read.
  let ownedGen = 0;
  const loadOwned = async () => {
    if (!ns) { owned.replaceChildren(h('li', { class: 'muted' }, 'none')); return; }
    const gen = ++ownedGen;
    const items = [];
    for (const key of ['deployments', 'replicasets', 'statefulsets', 'daemonsets', 'jobs', 'pods']) {
      const cr = resources.get(key);
      let list;
      // A list lost to the network is tried again, so that the page does not leave out
      // what it owns without a word; one the user may not read (4xx) is skipped.
      try { list = await getNotLost(listPath(cr, ns), signal); } catch (e) { if (signal.aborted) return; continue; }
      if (gen !== ownedGen) return;
      for (const o of list.items) {
        if ((o.metadata.ownerReferences || []).some(ref => ref.uid === obj.metadata.uid)) {
          items.push(h('li', {}, h('a', { href: objHash(cr, ns, o.metadata.name) }, `${cr.kind} ${o.metadata.name}`)));
        }
      }
    }
    if (gen === ownedGen) owned.replaceChildren(...(items.length ? items : [h('li', { class: 'muted' }, 'none')]));
  };
  const loadEvents = async () => {
    const evPath = (ns ? `/api/v1/namespaces/${encodeURIComponent(ns)}/events` : '/api/v1/events') +
      `?fieldSelector=${encodeURIComponent('involvedObject.name=' + name)}`;
    // Lost to the network, the list is asked for again: without it there is no watch
    // either, and the page would show "Failed to fetch" for its events until a reload.
    const list = await getNotLost(evPath, signal);
    const mine = list.items.filter(e => e.involvedObject.uid === obj.metadata.uid || (!e.involvedObject.uid && e.involvedObject.kind === r.kind));
    mine.sort((a, b) => new Date(a.lastTimestamp || a.eventTime || 0) - new Date(b.lastTimestamp || b.eventTime || 0));
    events.replaceChildren(h('tr', {}, ['Type', 'Reason', 'Age', 'From', 'Message'].map(c => h('th', {}, c))),
      ...mine.map(e => h('tr', {}, h('td', {}, e.type), h('td', {}, e.reason), h('td', {}, age(e.lastTimestamp || e.eventTime)),
        h('td', {}, (e.source && e.source.component) || e.reportingComponent || ''), h('td', {}, e.message))));
    return list.metadata.resourceVersion;
  };
  loadOwned().catch(() => {});
  const evRV = await loadEvents().catch(e => { events.replaceChildren(h('tr', {}, h('td', {}, e.message))); return null; });

  // Live: the object itself, its events and what it owns.
  const fieldSel = `?fieldSelector=${encodeURIComponent('metadata.name=' + name)}`;
  const relistObj = async () => { obj = await api(path, { signal }); render(); return obj.metadata.resourceVersion; };
  watch(listPath(r, ns) + fieldSel, obj.metadata.resourceVersion, ev => {
    if (ev.type === 'DELETED') { showError(`${r.kind} ${name} was deleted`); return; }
    obj = ev.object; render(); loadOwned().catch(() => {});
  }, relistObj, signal);
  if (evRV) {
    const evList = (ns ? `/api/v1/namespaces/${encodeURIComponent(ns)}/events` : '/api/v1/events') + `?fieldSelector=${encodeURIComponent('involvedObject.name=' + name)}`;
    watch(evList, evRV, () => { loadEvents().catch(() => {}); showJourney(); }, loadEvents, signal);
  }
}

// ---------- the pod's journey ----------

// journeyKinds are the kinds whose page shows the journey of their pods from creation
// to Ready, as `mizzen trace` prints it: read by the dashboard (internal/trace) from
// the events and conditions the components recorded, with the user's own token.
const journeyKinds = {
  Pod: { title: 'Journey', load: loadPodJourney },
  Deployment: { title: 'Pod journeys', load: loadDeploymentJourneys },
};

// throttled runs fn at most every half second, and once more after the last call.
function throttled(fn) {
  let timer = null, again = false;
  const run = () => { timer = setTimeout(() => { timer = null; if (again) { again = false; run(); } }, 500); fn(); };
  return () => { if (timer) again = true; else run(); };
}

function ms(v) {
  if (v < 1000) return `${v}ms`;
  return `${(v / 1000).toFixed(v < 10000 ? 2 : 1)}s`;
}

async function loadPodJourney(box, ns, name, signal) {
  const j = await api(`/journey/pods/${encodeURIComponent(ns)}/${encodeURIComponent(name)}`, { base: HELPERS, signal });
  const total = Math.max(1, ...j.steps.map(s => s.sinceMs));
  const rows = j.steps.map(s => {
    const left = (s.sinceMs - s.tookMs) / total * 100, width = Math.max(s.tookMs / total * 100, 0.4);
    return h('tr', { class: 'step', 'data-step': s.label },
      h('td', {}, s.label), h('td', {}, s.component),
      h('td', { class: 'num', title: s.at }, '+' + ms(s.sinceMs) + (s.precise ? '' : ' (to the second)')),
      h('td', { class: 'num' }, ms(s.tookMs)),
      h('td', { class: 'timeline' }, h('div', { class: 'track' }, h('span', { style: `left:${left}%;width:${width}%`, title: `${s.source}${s.detail ? ': ' + s.detail : ''}` }))));
  });
  box.replaceChildren(
    h('table', { id: 'journey-steps' }, h('tr', {}, ['Step', 'Recorded by', 'Since created', 'Took', 'Timeline'].map(c => h('th', {}, c))), ...rows),
    j.pending.length ? h('p', { class: 'muted', id: 'journey-pending' }, 'Not recorded yet: ' + j.pending.join(', ')) : null);
}

async function loadDeploymentJourneys(box, ns, name, signal) {
  const d = await api(`/journey/deployments/${encodeURIComponent(ns)}/${encodeURIComponent(name)}`, { base: HELPERS, signal });
  const p = x => [x.p50, x.p90, x.p99, x.max].map(v => h('td', { class: 'num' }, ms(v)));
  box.replaceChildren(
    h('p', { id: 'journeys-count' }, `${d.pods} pods, ${d.ready} ready`),
    h('table', { id: 'journeys' },
      h('tr', {}, ['Step', 'Recorded by', 'Pods', 'Took p50', 'p90', 'p99', 'max', 'Since created p50', 'p90', 'p99', 'max'].map(c => h('th', {}, c))),
      ...d.steps.map(s => h('tr', { class: 'step', 'data-step': s.label }, h('td', {}, s.label), h('td', {}, s.component), h('td', { class: 'num' }, s.pods), p(s.took), p(s.since)))));
}

// ---------- pod logs, followed ----------

// showLogs follows a container's log. A followed stream can drop while the container
// still runs: a browser abandons its open connections whenever the machine's network
// changes (an address or link comes or goes), and proxies time out. So the log is asked
// for with timestamps, and after a drop asked for again from the last shown line's
// second (sinceTime), skipping the lines already shown; the timestamps are not shown.
async function showLogs(main, ns, name, container, signal) {
  // The pod, lost to the network, is asked for again (see showObject).
  const pod = await getNotLost(objPath(resources.get('pods'), ns, name), signal);
  const select = h('select', { id: 'container' }, pod.spec.containers.map(c => h('option', { value: c.name, selected: c.name === container }, c.name)));
  select.addEventListener('change', () => { location.hash = `#/logs/${encodeURIComponent(ns)}/${encodeURIComponent(name)}?container=${encodeURIComponent(select.value)}`; });
  const out = h('pre', { class: 'logs', id: 'logs' });
  const state = h('span', { id: 'logs-state', class: 'muted' });
  main.append(h('h1', {}, 'Logs of ', h('a', { href: objHash(resources.get('pods'), ns, name) }, name)), h('div', { class: 'actions' }, 'container ', select, ' ', state), out);
  const path = `${objPath(resources.get('pods'), ns, name)}/log`;
  const show = text => {
    const atBottom = out.scrollTop + out.clientHeight >= out.scrollHeight - 4;
    out.append(text);
    if (atBottom) out.scrollTop = out.scrollHeight;
  };
  let lastKey = ''; // the timestamp of the last line shown, as a sortable key
  let sameShown = 0; // how many of the lines shown carry lastKey
  for (let attempt = 0; !signal.aborted; attempt++) {
    const q = new URLSearchParams({ container: container || pod.spec.containers[0].name, follow: 'true', timestamps: 'true' });
    if (lastKey) q.set('sinceTime', lastKey.slice(0, 19) + 'Z'); else q.set('tailLines', '2000');
    let skip = sameShown; // lines of lastKey this stream repeats
    try {
      const resp = await request(`${path}?${q}`, { signal, headers: { Accept: '*/*' } });
      state.textContent = '';
      for await (const line of logLines(resp.body, signal)) {
        const { key, text } = splitTimestamp(line);
        if (key && lastKey && key < lastKey) continue;
        if (key && key === lastKey && skip > 0) { skip--; continue; }
        if (key && key !== lastKey) { lastKey = key; sameShown = 0; }
        if (key) sameShown++;
        show(text);
      }
      if (!signal.aborted) show(h('span', { class: 'muted' }, '\n(the log stream ended)'));
      return;
    } catch (e) {
      if (signal.aborted) return;
      if (e instanceof APIError) throw e; // the apiserver's refusal is the page's error
      state.textContent = '(the connection dropped: following again)';
      await sleep(Math.min(1000 * (attempt + 1), 5000));
    }
  }
}

// logLines yields a log stream's lines, each with its newline; the last may lack one.
async function* logLines(body, signal) {
  const reader = body.getReader();
  signal.addEventListener('abort', () => reader.cancel().catch(() => {}));
  const dec = new TextDecoder();
  let buf = '';
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buf += dec.decode(value, { stream: true });
    let i;
    while ((i = buf.indexOf('\n')) >= 0) {
      yield buf.slice(0, i + 1);
      buf = buf.slice(i + 1);
    }
  }
  buf += dec.decode();
  if (buf) yield buf;
}

// splitTimestamp takes the RFC 3339 timestamp off a line of a log asked for with
// timestamps=true; key is the timestamp with nine fractional digits, so that keys sort
// as the times do.
function splitTimestamp(line) {
  const m = /^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:\.(\d{1,9}))?Z /.exec(line);
  if (!m) return { key: '', text: line };
  return { key: m[1] + '.' + (m[2] || '').padEnd(9, '0'), text: line.slice(m[0].length) };
}

// ---------- a terminal into a container: exec over WebSocket (v5/v4.channel.k8s.io) ----------

async function showTerminal(main, ns, name, container, signal) {
  // The pod, lost to the network, is asked for again (see showObject).
  const pod = await getNotLost(objPath(resources.get('pods'), ns, name), signal);
  container = container || pod.spec.containers[0].name;
  const command = h('input', { id: 'exec-command', value: 'sh' });
  const connect = h('button', { id: 'exec-connect', type: 'button' }, 'Reconnect');
  const state = h('span', { id: 'exec-state', class: 'muted' });
  const box = h('div', { class: 'terminal', id: 'terminal' });
  main.append(h('h1', {}, 'Terminal in ', h('a', { href: objHash(resources.get('pods'), ns, name) }, name), h('span', { class: 'muted' }, ' container ' + container)),
    h('div', { class: 'actions' }, 'command ', command, connect, state), box);
  if (typeof window.Terminal !== 'function') await loadScript('static/vendor/xterm/xterm.js', signal);
  const term = new window.Terminal({ convertEol: false, cursorBlink: true, fontSize: 14, rows: 30 });
  term.open(box);
  signal.addEventListener('abort', () => term.dispose());
  let ws = null;
  const enc = new TextEncoder();
  const send = (channel, bytes) => {
    if (!ws || ws.readyState !== WebSocket.OPEN) return;
    const msg = new Uint8Array(bytes.length + 1);
    msg[0] = channel; msg.set(bytes, 1);
    ws.send(msg);
  };
  const resize = () => send(4, enc.encode(JSON.stringify({ Width: term.cols, Height: term.rows })));
  term.onData(d => send(0, enc.encode(d)));
  term.onResize(resize);
  const open = () => {
    if (ws) ws.close();
    term.reset();
    const q = new URLSearchParams({ container, stdin: 'true', stdout: 'true', tty: 'true' });
    for (const arg of command.value.trim().split(/\s+/).filter(Boolean)) q.append('command', arg);
    const url = `wss://${location.host}${API}${objPath(resources.get('pods'), ns, name)}/exec?${q}`;
    const protocols = ['v5.channel.k8s.io', 'v4.channel.k8s.io'];
    // A WebSocket cannot carry an Authorization header: a token the tab holds goes as
    // the subprotocol upstream's apiserver reads it from.
    const token = IN_APISERVER ? sessionStorage.getItem(TOKEN_KEY) : null;
    if (token) protocols.push('base64url.bearer.authorization.k8s.io.' + btoa(token).replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, ''));
    ws = new WebSocket(url, protocols);
    ws.binaryType = 'arraybuffer';
    state.textContent = 'connecting…';
    ws.onopen = () => { state.textContent = `connected (${ws.protocol})`; resize(); term.focus(); };
    ws.onmessage = ev => {
      const data = new Uint8Array(ev.data);
      if (!data.length) return;
      if (data[0] === 1 || data[0] === 2) term.write(data.subarray(1));
      else if (data[0] === 3) {
        let st;
        try { st = JSON.parse(new TextDecoder().decode(data.subarray(1))); } catch (e) { st = {}; }
        if (st.status && st.status !== 'Success') term.write(`\r\n\x1b[31m${st.message || 'command failed'}\x1b[0m\r\n`);
      }
    };
    ws.onclose = ev => { state.textContent = `closed${ev.reason ? ': ' + ev.reason : ''}`; };
    ws.onerror = () => { state.textContent = 'the connection failed (is the container running, and may you exec into it?)'; };
  };
  connect.addEventListener('click', open);
  signal.addEventListener('abort', () => { if (ws) ws.close(); });
  open();
}

// ---------- the cluster at a glance ----------

// showOverview draws the cluster as the seeds draw it: the apiserver in the middle,
// etcd beneath it, every other component around it, each with its health, kept live
// by watching nodes, leases and the add-ons' objects.
async function showOverview(main, signal) {
  const svgBox = h('div', { id: 'overview' });
  const legend = h('p', { class: 'legend' }, h('span', { class: 'ok' }, '● healthy'), h('span', { class: 'bad' }, '● unhealthy'), h('span', { class: 'unknown' }, '● unknown'));
  const details = h('table', { id: 'components' });
  main.append(h('h1', {}, 'The cluster at a glance'), legend, svgBox, h('h2', {}, 'Components'), details);
  const state = { readyz: null, nodes: null, leases: null, dns: null, metrics: null, proxies: {}, errors: {} };

  const draw = () => {
    const comps = components(state);
    svgBox.replaceChildren(starSVG(comps));
    details.replaceChildren(h('tr', {}, ['Component', 'Health', 'Detail'].map(c => h('th', {}, c))),
      ...comps.map(c => h('tr', { 'data-component': c.id }, h('td', {}, c.label), h('td', { class: c.health }, c.health === 'ok' ? 'healthy' : c.health === 'bad' ? 'unhealthy' : 'unknown'), h('td', {}, c.detail))));
  };
  const keep = (name, path, opts = {}) => {
    const load = async () => {
      try {
        const list = await api(path, { signal });
        state[name] = list.items || list; delete state.errors[name];
        draw();
        return list.metadata ? list.metadata.resourceVersion : '';
      } catch (e) {
        if (signal.aborted) throw e;
        state[name] = null; state.errors[name] = e.message; draw();
        throw e;
      }
    };
    // A first list lost is tried again, as the watch's relists are: otherwise the
    // component would stay unknown until a reload.
    untilNotLost(load, signal).then(rv => { if (opts.watch !== false) watch(path, rv, () => load().catch(() => {}), load, signal); }).catch(() => {});
  };
  keep('nodes', '/api/v1/nodes');
  keep('leases', '/apis/coordination.k8s.io/v1/namespaces/kube-system/leases');
  keep('dns', '/apis/discovery.k8s.io/v1/namespaces/kube-system/endpointslices?labelSelector=' + encodeURIComponent('kubernetes.io/service-name=kube-dns'));
  keep('metrics', '/apis/apiregistration.k8s.io/v1/apiservices?fieldSelector=' + encodeURIComponent('metadata.name=v1beta1.metrics.k8s.io'));
  const poll = async () => {
    while (!signal.aborted) {
      try {
        const resp = await fetch(API + '/readyz', { signal, headers: authHeaders(), credentials: 'same-origin' });
        state.readyz = resp.ok ? 'ok' : `${resp.status}: ${(await resp.text()).trim()}`;
      } catch (e) { if (signal.aborted) return; state.readyz = e.message; }
      await askProxies(state, signal);
      draw();
      await sleep(5000); // leases expire without an event: look again
    }
  };
  poll();
}

// askProxies reads each node's service proxy's /healthz (upstream's answer: 200 while its
// rules keep up with the API, 503 when a change waits too long), which the dashboard asks
// through the apiserver's node proxy as the logged-in user: who may not get nodes/proxy
// sees the refusal.
async function askProxies(state, signal) {
  if (state.settings === undefined) {
    // Asked again if the network loses it: taken as no settings, the page said for good
    // that the dashboard was given no proxy health port.
    try {
      state.settings = await untilNotLost(async () => {
        const resp = await fetch(HELPERS + '/settings', { signal, headers: authHeaders(), credentials: 'same-origin' });
        return resp.ok ? await resp.json() : {};
      }, signal);
    } catch (e) { return; } // aborted: untilNotLost throws nothing else here
  }
  const port = state.settings.proxyHealthzPort;
  if (!port || !state.nodes) return;
  await Promise.all(state.nodes.map(async n => {
    const name = n.metadata.name;
    let health;
    try {
      const resp = await fetch(`${HELPERS}/proxyhealth/${encodeURIComponent(name)}`, { signal, headers: authHeaders(), credentials: 'same-origin' });
      const a = await resp.json();
      if (!resp.ok) health = { health: 'unknown', short: 'not asked', detail: a.message || `${resp.status}` };
      else if (!a.reachable) health = { health: a.code === 401 || a.code === 403 ? 'unknown' : 'bad', short: 'unreachable', detail: a.message };
      else if (a.healthy) health = { health: 'ok', short: 'rules current', detail: a.lastUpdated ? `rules written ${age(a.lastUpdated)} ago` : 'no rules written yet, none waiting' };
      else health = { health: 'bad', short: 'rules stale', detail: `${a.message}; last written ${a.lastUpdated ? age(a.lastUpdated) + ' ago' : 'never'}` };
    } catch (e) {
      if (signal.aborted) return;
      health = { health: 'bad', short: 'unreachable', detail: e.message };
    }
    state.proxies[name] = { ...health, detail: `${health.detail} (/healthz on port ${port})` };
  }));
}

function leaseHealth(lease) {
  if (!lease || !lease.spec.holderIdentity) return { health: 'bad', detail: 'no leader' };
  const renew = new Date(lease.spec.renewTime || lease.spec.acquireTime || 0).getTime();
  const fresh = Date.now() - renew < (lease.spec.leaseDurationSeconds || 15) * 1000;
  return { health: fresh ? 'ok' : 'bad', short: fresh ? 'leader ' + lease.spec.holderIdentity.split('_')[0] : 'lease expired', detail: `leader ${lease.spec.holderIdentity}, renewed ${age(lease.spec.renewTime)} ago${fresh ? '' : ' (expired)'}` };
}

// components lists what the overview draws, from what the user may read.
function components(s) {
  const forbidden = name => s.errors[name] ? { health: 'unknown', detail: s.errors[name] } : null;
  const out = [];
  const api = s.readyz === null ? { health: 'unknown', detail: 'asking /readyz' } : s.readyz === 'ok' ? { health: 'ok', detail: '/readyz ok' } : { health: 'bad', detail: s.readyz };
  out.push({ id: 'apiserver', role: 'center', label: 'apiserver', short: api.health === 'ok' ? 'ready' : api.health === 'bad' ? 'not ready' : 'asking', ...api });
  out.push({ id: 'etcd', role: 'below', label: 'etcd', health: api.health, detail: api.health === 'ok' ? 'reachable: the apiserver answers ready' : 'seen only through the apiserver' });
  for (const [id, label] of [['kube-scheduler', 'scheduler'], ['kube-controller-manager', 'controller-manager']]) {
    const f = forbidden('leases');
    const lease = s.leases && s.leases.find(l => l.metadata.name === id);
    out.push({ id, label, ...(f || (s.leases ? leaseHealth(lease) : { health: 'unknown', detail: 'loading' })) });
  }
  const nodesErr = forbidden('nodes');
  if (nodesErr) out.push({ id: 'kubelets', label: 'kubelets', ...nodesErr });
  for (const n of s.nodes || []) {
    const ready = (n.status.conditions || []).find(c => c.type === 'Ready');
    const health = !ready ? 'unknown' : ready.status === 'True' ? 'ok' : 'bad';
    out.push({ id: 'kubelet-' + n.metadata.name, label: `kubelet ${n.metadata.name}`, health, short: ready ? (ready.status === 'True' ? 'Ready' : 'NotReady') : 'unknown',
      detail: ready ? `Ready=${ready.status}${ready.reason ? ' (' + ready.reason + ')' : ''}${ready.message ? ': ' + ready.message : ''}` : 'no Ready condition yet' });
    const proxy = s.proxies[n.metadata.name] || (s.settings && !s.settings.proxyHealthzPort
      ? { health: 'unknown', short: 'not asked', detail: 'the dashboard was given no proxy health port' }
      : { health: 'unknown', short: 'asking', detail: 'asking the proxy\'s /healthz' });
    out.push({ id: 'proxy-' + n.metadata.name, label: `proxy ${n.metadata.name}`, ...proxy });
  }
  const dnsErr = forbidden('dns');
  if (dnsErr) out.push({ id: 'dns', label: 'dns', ...dnsErr });
  else if (s.dns) {
    const ready = s.dns.flatMap(sl => sl.endpoints || []).filter(e => !e.conditions || e.conditions.ready !== false);
    out.push({ id: 'dns', label: 'dns', health: s.dns.length ? (ready.length ? 'ok' : 'bad') : 'unknown',
      detail: s.dns.length ? `kube-system/kube-dns: ${ready.length} ready endpoint(s)` : 'no kube-dns Service' });
  }
  const msErr = forbidden('metrics');
  if (msErr) out.push({ id: 'metrics-server', label: 'metrics-server', ...msErr });
  else if (s.metrics) {
    const svc = s.metrics[0];
    const cond = svc && (svc.status.conditions || []).find(c => c.type === 'Available');
    out.push({ id: 'metrics-server', label: 'metrics-server', health: !svc ? 'unknown' : cond && cond.status === 'True' ? 'ok' : 'bad',
      detail: !svc ? 'not registered' : cond ? `Available=${cond.status}${cond.message ? ': ' + cond.message : ''}` : 'no Available condition' });
  }
  out.push({ id: 'dashboard', label: 'dashboard', health: 'ok', short: 'serving this page', detail: 'serving this page' });
  return out;
}

// starSVG puts the apiserver in the middle, etcd beneath, and the rest on a ring.
function starSVG(comps) {
  const ns = 'http://www.w3.org/2000/svg';
  const W = 900, H = 560, cx = W / 2, cy = 230, bw = 150, bh = 44;
  const svg = document.createElementNS(ns, 'svg');
  svg.setAttribute('viewBox', `0 0 ${W} ${H}`);
  svg.setAttribute('class', 'star');
  svg.setAttribute('width', '100%');
  const el = (tag, attrs, text) => {
    const e = document.createElementNS(ns, tag);
    for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, v);
    if (text != null) e.textContent = text;
    svg.append(e);
    return e;
  };
  const ring = comps.filter(c => c.id !== 'apiserver' && c.id !== 'etcd');
  const pos = new Map([['apiserver', [cx, cy]], ['etcd', [cx, cy + 270]]]);
  // The ring leaves the bottom free for etcd.
  ring.forEach((c, i) => {
    const a = Math.PI * (0.75 + 1.5 * (ring.length === 1 ? 0.5 : i / (ring.length - 1)));
    pos.set(c.id, [cx + 340 * Math.cos(a), cy + 190 * Math.sin(a)]);
  });
  for (const c of comps) {
    if (c.id === 'apiserver') continue;
    const [x, y] = pos.get(c.id);
    el('line', { x1: cx, y1: cy, x2: x, y2: y });
  }
  for (const c of comps) {
    const [x, y] = pos.get(c.id);
    const big = c.id === 'apiserver';
    const w = big ? 200 : bw, hh = big ? 64 : bh;
    const g = el('g', { 'data-component': c.id });
    const rect = document.createElementNS(ns, 'rect');
    for (const [k, v] of Object.entries({ x: x - w / 2, y: y - hh / 2, width: w, height: hh, rx: 8, class: 'box ' + c.health })) rect.setAttribute(k, v);
    const title = document.createElementNS(ns, 'title');
    title.textContent = `${c.label}: ${c.detail}`;
    rect.append(title);
    g.append(rect);
    const t = document.createElementNS(ns, 'text');
    t.setAttribute('x', x); t.setAttribute('y', y + 4); t.setAttribute('text-anchor', 'middle'); t.setAttribute('class', 'title');
    t.setAttribute('y', y - 2);
    t.textContent = c.label.length > 24 ? c.label.slice(0, 23) + '…' : c.label;
    g.append(t);
    const sub = document.createElementNS(ns, 'text');
    sub.setAttribute('x', x); sub.setAttribute('y', y + 14); sub.setAttribute('text-anchor', 'middle'); sub.setAttribute('class', 'sub');
    const word = c.short || (c.health === 'ok' ? 'healthy' : c.health === 'bad' ? 'unhealthy' : 'unknown');
    sub.textContent = word.length > 26 ? word.slice(0, 25) + '…' : word;
    g.append(sub);
  }
  return svg;
}

// ---------- start ----------

async function start() {
  document.getElementById('logout').addEventListener('click', async () => {
    if (IN_APISERVER) {
      // A token this tab holds is forgotten; a client certificate stays the browser's.
      sessionStorage.removeItem(TOKEN_KEY);
      showTokenForm('Logged out. A client certificate the browser presents still logs in: reload the page.');
      return;
    }
    await fetch('/logout', { method: 'POST', headers: { 'X-CSRF-Token': csrfToken() }, credentials: 'same-origin' });
    location.href = '/login';
  });
  const nsInput = document.getElementById('namespace');
  nsInput.value = localStorage.getItem('mizzen-namespace') || '';
  nsInput.addEventListener('change', () => { localStorage.setItem('mizzen-namespace', nsInput.value.trim()); route(); });
  const nav = document.getElementById('nav');
  nav.append(h('a', { href: '#/overview' }, 'Overview'), h('h3', {}, 'Resources'),
    ...BUILTIN.map(r => h('a', { href: `#/list/${r.key}`, id: `nav-${r.key}` }, r.resource)));
  window.addEventListener('hashchange', route);
  route();
  api('/apis/authentication.k8s.io/v1/selfsubjectreviews', { method: 'POST', headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({ apiVersion: 'authentication.k8s.io/v1', kind: 'SelfSubjectReview' }) })
    .then(r => {
      const name = r.status.userInfo.username;
      document.getElementById('user').textContent = name;
      // At /ui/ without a certificate or token the apiserver may take the browser for
      // system:anonymous: offer the token form.
      if (IN_APISERVER && name === 'system:anonymous') showTokenForm('You are not logged in.');
    }).catch(e => { if (IN_APISERVER && e.code === 403 && !sessionStorage.getItem(TOKEN_KEY)) showTokenForm('You are not logged in.'); });
  // The namespace picker's suggestions, asked for again if the network loses them.
  getNotLost('/api/v1/namespaces', new AbortController().signal).then(l => {
    document.getElementById('namespaces').replaceChildren(...l.items.map(n => h('option', { value: n.metadata.name })));
  }).catch(() => {});
  const custom = await discoverCustom();
  // A page of a custom resource opened directly waited for discovery to know it.
  const key = location.hash.split('/')[2];
  if (/^#\/(list|obj)\//.test(location.hash) && key && custom.some(r => r.key === decodeURIComponent(key))) route();
  if (custom.length) nav.append(h('h3', {}, 'Custom resources'), ...custom.map(r => h('a', { href: `#/list/${r.key}`, id: `nav-${r.key}` }, r.resource)));
}

start();
