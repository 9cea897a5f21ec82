// zkbroker lab dashboard: plain JavaScript and SVG, nothing loaded from elsewhere.
// Live state comes from one EventSource (/api/events/stream): unnamed messages are timeline events, named
// `cluster` and `partitions` messages are the views of DESIGN §11 whenever they change.

const TOKEN = document.querySelector('meta[name="lab-token"]').content;
const SVG_NS = 'http://www.w3.org/2000/svg';
const COLORS = ['#2255aa', '#c2410c', '#15803d', '#7e22ce', '#0e7490', '#a16207', '#be185d', '#4d7c0f'];

const state = {
  cluster: null, partitions: [], events: [], view: 'truth', replayAt: null, selected: null,
  history: null, historyStale: true, zkSelected: null, kinds: new Set(), brokers: new Set(),
  shown: [],  // [{ts, kind, shownAt}] for bench/dashboard.py: when each event reached the page
  stripShown: [],  // [{controller, epoch, states, shownAt}] each time the strip changed
};
window.zkbrokerDashboard = state;

// ---- small helpers ---------------------------------------------------------------------------------------

function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === null || v === undefined || v === false) continue;
    if (k === 'class') el.className = v;
    else if (k.startsWith('on')) el.addEventListener(k.slice(2), v);
    else if (k === 'dataset') Object.assign(el.dataset, v);
    else el.setAttribute(k, v === true ? '' : v);
  }
  for (const c of children.flat()) {
    if (c === null || c === undefined || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}

function s(tag, attrs = {}, ...children) {
  const el = document.createElementNS(SVG_NS, tag);
  for (const [k, v] of Object.entries(attrs)) if (v !== null && v !== undefined) el.setAttribute(k, v);
  for (const c of children.flat()) el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  return el;
}

const color = (broker) => (broker === null || broker === undefined || broker < 0) ? '#888' : COLORS[broker % COLORS.length];
const ids = (list) => (list && list.length) ? list.join(',') : 'none';
const dash = (v) => (v === null || v === undefined) ? '–' : String(v);

function clock(ts) {
  if (ts === null || ts === undefined) return '?';
  const d = new Date(ts);
  const pad = (n, w = 2) => String(n).padStart(w, '0');
  return `${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}.${pad(d.getMilliseconds(), 3)}`;
}

function say(text, error = false) {
  const m = document.getElementById('message');
  m.textContent = text;
  m.classList.toggle('error', error);
}

async function getJSON(url) {
  const r = await fetch(url, { headers: { Accept: 'application/json' } });
  const body = await r.json();
  if (!r.ok) throw new Error(body.error || r.statusText);
  return body;
}

async function post(url, body) {
  const r = await fetch(url, {
    method: 'POST', body: JSON.stringify(body),
    headers: { 'Content-Type': 'application/json', 'X-Lab-Token': TOKEN },
  });
  const answer = await r.json();
  if (!r.ok) throw new Error(answer.error || r.statusText);
  return answer;
}

// ---- faults ----------------------------------------------------------------------------------------------

async function fault(body, button) {
  const what = `${body.action} ${body.broker !== undefined ? 'broker ' + body.broker : body.zookeeper !== undefined ? 'ZooKeeper ' + body.zookeeper : body.node || 'everything'}`;
  say(`${what}…`);
  if (button) button.disabled = true;
  try {
    const answer = await post('/api/faults', body);
    say(answer.message);
  } catch (e) {
    say(e.message, true);
  } finally {
    if (button) button.disabled = false;
  }
}

function faultButton(label, body, title) {
  return h('button', {
    type: 'button', title, 'data-action': body.action,
    onclick: (e) => fault(body, e.currentTarget),
  }, label);
}

// ---- the cluster strip (the same markup as page.py renders) ---------------------------------------------

const STATE_WORDS = { running: 'running', paused: 'paused', dead: 'dead', 'cut-off': 'cut off' };

// A KRaft lab's strip (page.py's render_quorum_strip): the quorum's leader, epoch and high watermark, each
// voter's Raft state, epoch, log end and lag, and who voted for whom in the last election.
function renderQuorumStrip(cluster, replaying) {
  const q = cluster.quorum;
  const head = q.leader === null || q.leader === undefined
    ? h('span', { class: 'controller none' }, 'No quorum leader known')
    : [h('span', { class: 'controller' }, 'Quorum leader: controller ', h('b', { id: 'quorum-leader' }, q.leader)), ' ',
      h('span', { class: 'epoch' }, 'epoch ', h('b', { id: 'quorum-epoch' }, dash(q.epoch))), ' ',
      h('span', { class: 'hw' }, 'high watermark ', h('b', { id: 'quorum-hw' }, dash(q.high_watermark)))];
  const votes = (q.votes || []).map((v) => `${v.from} ${v.granted ? '→' : '✗'} ${v.to}`).join(', ');
  const voters = q.voters.map((v) => h('li', {
    class: ['broker', 'voter', `state-${v.process}`, `raft-${v.state}`, v.id === q.leader ? 'is-controller' : ''].join(' ').trim(),
    'data-controller': v.id,
  },
  h('span', { class: 'name' }, `Controller ${v.id}`, v.id === q.leader ? [' ', h('span', { class: 'badge' }, 'leader')] : null),
  h('span', { class: 'state raft-state' }, v.state),
  h('span', { class: 'epoch-seen' }, `epoch ${v.epoch === null ? '?' : v.epoch}`),
  h('span', { class: 'log-end' }, `log end ${dash(v.log_end_offset)}${v.lag === null || v.lag === undefined ? '' : ', lag ' + v.lag}`),
  v.voted_for !== null && v.voted_for !== undefined ? h('span', { class: 'voted' }, `voted for ${v.voted_for}`) : null,
  v.cut_off_from && v.cut_off_from.length ? h('span', { class: 'cut' }, `cut off from ${v.cut_off_from.join(', ')}`) : null,
  v.fault_points && v.fault_points.length ? h('span', { class: 'cut' }, `fault points: ${v.fault_points.join('; ')}`) : null,
  replaying ? null : h('span', { class: 'buttons' },
    v.process === 'dead'
      ? faultButton('start', { action: 'start', controller: v.id }, 'start it again; it rejoins the quorum')
      : [faultButton('kill', { action: 'kill', controller: v.id }, 'SIGKILL: the others elect after their fetch timeout'),
        v.process === 'paused'
          ? faultButton('resume', { action: 'resume', controller: v.id }, 'SIGCONT')
          : faultButton('pause', { action: 'pause', controller: v.id }, 'SIGSTOP'),
        faultButton('stop', { action: 'stop', controller: v.id }, 'SIGTERM: a leader resigns first')])));
  const strip = document.getElementById('strip');
  strip.replaceChildren(h('div', { class: 'strip-head' }, head),
    votes ? h('div', { class: 'votes', id: 'quorum-votes' }, `Votes in epoch ${q.epoch}: ${votes}`) : null,
    h('ul', { class: 'brokers voters' }, voters),
    cluster.brokers.length
      ? h('ul', { class: 'brokers kraft-brokers' }, cluster.brokers.map((b) => renderKRaftBroker(b, replaying)))
      : h('p', { class: 'empty' }, 'No brokers (--brokers 0): this lab is its quorum.'));
  state.stripShown.push({
    controller: q.leader, epoch: q.epoch, shownAt: Date.now(),
    states: Object.fromEntries(q.voters.map((v) => [v.id, v.state])),
  });
}

// A KRaft broker (page.py's _kraft_broker): its process, whether the active controller has it fenced, and the
// metadata offset it has applied.
function renderKRaftBroker(b, replaying) {
  const fenced = b.fenced === null || b.fenced === undefined ? 'not registered' : (b.fenced ? 'fenced' : 'unfenced');
  return h('li', { class: ['broker', 'kraft-broker', `state-${b.state}`, b.fenced ? 'fenced' : ''].join(' ').trim(),
    'data-broker': b.id },
  h('span', { class: 'name' }, `Broker ${b.id}`),
  h('span', { class: 'state' }, STATE_WORDS[b.state] || b.state),
  h('span', { class: 'lifecycle' }, fenced),
  h('span', { class: 'log-end' }, `metadata offset ${dash(b.metadata_offset)}`),
  b.cut_off_from && b.cut_off_from.length ? h('span', { class: 'cut' }, `cut off from ${b.cut_off_from.join(', ')}`) : null,
  replaying ? null : h('span', { class: 'buttons' },
    b.state === 'dead'
      ? faultButton('start', { action: 'start', broker: b.id }, 'start it again; waits until it is unfenced')
      : [faultButton('kill', { action: 'kill', broker: b.id }, 'SIGKILL: fenced after broker.session.timeout.ms'),
        faultButton('stop', { action: 'stop', broker: b.id }, 'SIGTERM: controlled shutdown through heartbeats')]));
}

function renderStrip(cluster, replaying) {
  if (cluster.mode === 'kraft') return renderQuorumStrip(cluster, replaying);
  const c = cluster.controller;
  let head;
  if (cluster.lab_running === false && !replaying) {
    head = h('span', { class: 'controller none' }, 'No lab runs in this directory: start one with ',
      h('code', {}, 'zkbroker lab up --dir DIR'), ', or play a scenario');
  } else if (!cluster.zookeeper_reachable && !replaying) {
    head = h('span', { class: 'controller unknown' }, 'Controller unknown: no ZooKeeper quorum answers');
  } else if (replaying && (c.broker === null || c.broker === undefined) && (c.epoch === null || c.epoch === undefined)) {
    head = h('span', { class: 'controller unknown' }, 'Controller unknown at this moment (no election in the timeline before it)');
  } else if (c.broker === null || c.broker === undefined) {
    head = [h('span', { class: 'controller none' }, 'No controller'), ' ',
      h('span', { class: 'epoch' }, '/controller_epoch ', h('b', { id: 'controller-epoch' }, dash(c.epoch)))];
  } else {
    head = [h('span', { class: 'controller' }, '/controller: broker ', h('b', { id: 'controller-broker' }, c.broker)), ' ',
      h('span', { class: 'epoch' }, '/controller_epoch ', h('b', { id: 'controller-epoch' }, dash(c.epoch))), ' ',
      h('span', { class: 'elected' }, `elected ${clock(c.elected_at)}`)];
  }
  const zookeepers = cluster.zookeepers.map((z) => h('li', {
    class: `zookeeper role-${z.role}`, 'data-zookeeper': z.id,
  }, h('span', { class: 'name' }, `ZooKeeper ${z.id}`), ' ', h('span', { class: 'role' }, z.role),
  replaying ? null : h('span', { class: 'buttons' },
    z.process === 'dead'
      ? faultButton('start', { action: 'start', zookeeper: z.id }, 'zkbroker lab start --zookeeper')
      : [faultButton('kill', { action: 'kill', zookeeper: z.id }, 'SIGKILL'),
        z.process === 'paused'
          ? faultButton('resume', { action: 'resume', zookeeper: z.id }, 'SIGCONT')
          : faultButton('pause', { action: 'pause', zookeeper: z.id }, 'SIGSTOP'),
        faultButton('stop', { action: 'stop', zookeeper: z.id }, 'SIGTERM')])));
  const brokers = cluster.brokers.map((b) => renderBroker(b, c.broker, replaying));
  const strip = document.getElementById('strip');
  strip.replaceChildren(h('div', { class: 'strip-head' }, head), h('ul', { class: 'zookeepers' }, zookeepers),
    h('ul', { class: 'brokers' }, brokers));
  highlightSelection();
  state.stripShown.push({
    controller: c.broker, epoch: c.epoch, shownAt: Date.now(),
    states: Object.fromEntries(cluster.brokers.map((b) => [b.id, b.state])),
  });
}

function renderBroker(b, controller, replaying) {
  const classes = ['broker', `state-${b.state}`];
  if (b.id === controller) classes.push('is-controller');
  if (b.mismatches.length) classes.push('mismatch');
  const registered = { true: 'registered', false: 'not registered', null: 'registration unknown' }[String(b.registered)];
  const cutFromZk = b.cut_off_from.some((n) => n.startsWith('zookeeper'));
  return h('li', { class: classes.join(' '), 'data-broker': b.id },
    h('span', { class: 'name' }, `Broker ${b.id}`, b.id === controller ? [' ', h('span', { class: 'badge' }, 'controller')] : null),
    h('span', { class: 'state' }, STATE_WORDS[b.state] || b.state),
    h('span', { class: 'registration' }, registered, b.session ? [' ', h('code', { class: 'session' }, b.session)] : null),
    h('span', { class: 'epoch-seen' }, `epoch seen ${b.controller_epoch_seen === null ? '?' : b.controller_epoch_seen}`),
    b.cut_off_from.length ? h('span', { class: 'cut' }, `cut off from ${b.cut_off_from.join(', ')}`) : null,
    b.zookeeper_connected === false ? h('span', { class: 'cut' }, 'its ZooKeeper connection is down') : null,
    b.fault_points.length ? h('span', { class: 'cut' }, `fault points: ${b.fault_points.join('; ')}`) : null,
    b.mismatches.map((m) => h('span', { class: 'why', 'data-kind': m.kind }, m.text)),
    replaying ? null : h('span', { class: 'buttons' },
      b.state === 'dead'
        ? faultButton('start', { action: 'start', broker: b.id }, 'start it again; waits until it registers')
        : [faultButton('kill', { action: 'kill', broker: b.id }, 'SIGKILL: its session expires later'),
          b.state === 'paused'
            ? faultButton('resume', { action: 'resume', broker: b.id }, 'SIGCONT')
            : faultButton('pause', { action: 'pause', broker: b.id }, 'SIGSTOP: a long GC pause'),
          faultButton('stop', { action: 'stop', broker: b.id }, 'SIGTERM: controlled shutdown')],
      state.cluster && state.cluster.network ? (cutFromZk
        ? faultButton('heal', { action: 'heal', node: `broker:${b.id}` }, 'remove the partitions involving it')
        : faultButton('cut from ZooKeeper', { action: 'partition', node: `broker:${b.id}`, from: ['zookeeper'] },
          'drop its traffic with every ZooKeeper server')) : null));
}

// ---- truth beside the caches -----------------------------------------------------------------------------

function renderPartitions(partitions) {
  const body = document.querySelector('#partitions tbody');
  const all = [];
  if (!partitions.length) {
    body.replaceChildren(h('tr', {}, h('td', { colspan: 6, class: 'empty' }, 'no topics yet')));
  } else {
    body.replaceChildren(...partitions.map((p) => {
      all.push(...p.mismatches);
      const bad = new Set(p.mismatches.map((m) => m.broker));
      return h('tr', { class: p.mismatches.length ? 'mismatch' : '', 'data-partition': `${p.topic}-${p.partition}` },
        h('td', {}, h('b', {}, `${p.topic}-${p.partition}`)),
        h('td', { class: p.leader === -1 ? 'bad' : '' }, p.leader === -1 ? 'none' : dash(p.leader)),
        h('td', {}, dash(p.leader_epoch)),
        h('td', {}, ids(p.isr)),
        h('td', {}, dash(p.zk_version)),
        h('td', {}, h('div', { class: 'replicas' }, p.replicas.map((r) => renderReplica(p, r, bad.has(r.broker))))));
    }));
  }
  document.getElementById('mismatches').replaceChildren(...all.map((m) => h('li', { 'data-kind': m.kind }, m.text)));
  highlightSelection();
}

function renderReplica(p, r, mismatch) {
  const kinds = new Set(r.mismatch);
  const cell = (label, value, ...flags) => h('span', { class: flags.some((f) => kinds.has(f)) ? 'bad' : '' }, `${label} ${dash(value)}`);
  if (!r.answered) {
    return h('div', { class: 'replica silent', 'data-broker': r.broker },
      h('span', { class: 'who' }, `broker ${r.broker}`), ' no answer',
      h('span', { title: 'its lab control socket gave no state: paused, dead, or not a lab broker' }, ' (view unknown)'));
  }
  // Only a leader keeps an ISR (and its zkVersion) up to date; a follower's are those of the last LeaderAndIsr it
  // applied, which the leader's own ISR changes never reach (0.8.2's followers kept no ISR at all).
  const follower = r.believes_leader !== r.broker;
  const heard = follower ? ' (last heard)' : '';
  const lastHeard = (span) => follower ? Object.assign(span, { title: 'a follower does not track the ISR: this is '
    + 'the one in the last LeaderAndIsr it applied; the leader changes the state znode without telling it' }) : span;
  return h('div', { class: `replica${mismatch ? ' mismatch' : ''}`, 'data-broker': r.broker },
    h('span', { class: 'who' }, `broker ${r.broker}`), ' ',
    cell('leader', r.believes_leader, 'zombie_leader', 'wrong_leader'), ' ',
    cell('epoch', r.leader_epoch, 'stale_leader_epoch'), ' ',
    r.isr ? lastHeard(cell(`isr${heard}`, ids(r.isr), 'isr_differs')) : null, ' ',
    r.zk_version !== null ? lastHeard(cell(`zkVersion${heard}`, r.zk_version, 'cached_zk_version')) : null, ' ',
    r.metadata_leader !== null ? cell('metadata', r.metadata_leader, 'metadata_leader') : null, ' ',
    h('span', {}, `HW ${dash(r.hw)} LEO ${dash(r.leo)}`));
}

// ---- topics and groups -----------------------------------------------------------------------------------

async function refreshTopics() {
  try {
    const [topics, groups] = await Promise.all([getJSON('/api/topics'), getJSON('/api/groups').catch(() => [])]);
    const yes = (v, bad = true) => h('td', { class: v && bad ? 'yes-bad' : '' }, v ? 'yes' : 'no');
    document.querySelector('#topics tbody').replaceChildren(...topics.partitions.map((p) => h('tr', {
      'data-partition': `${p.topic}-${p.partition}`,
    }, h('td', {}, p.topic), h('td', {}, p.partition), h('td', {}, p.leader === -1 ? 'none' : dash(p.leader)),
    h('td', {}, ids(p.replicas)), h('td', {}, ids(p.isr)),
    h('td', {}, `${p.preferred_leader}${p.leader_is_preferred ? '' : ' (not leading)'}`),
    yes(p.under_replicated), yes(p.offline), h('td', {}, dash(p.log_start)), h('td', {}, dash(p.hw)),
    h('td', {}, dash(p.lso)), h('td', {}, dash(p.log_end)), h('td', {}, dash(p.open_transactions)))));
    document.querySelector('#topic-configs tbody').replaceChildren(...(topics.topics || []).map((t) => {
      const overrides = Object.entries(t.overrides).map(([k, v]) => `${k}=${v}`);
      return h('tr', { 'data-topic': t.topic }, h('td', {}, t.topic),
        h('td', { class: overrides.length ? 'overrides' : 'empty' }, overrides.length ? overrides.join(', ') : 'none'));
    }));
    document.querySelector('#hosted tbody').replaceChildren(...topics.brokers.map((b) => h('tr', { 'data-broker': b.broker },
      h('td', {}, b.broker), h('td', { class: b.registered === false ? 'yes-bad' : '' }, String(b.registered)),
      h('td', {}, b.replicas), h('td', {}, b.leaders), h('td', {}, b.under_replicated), h('td', {}, b.out_of_isr))));
    const rows = [];
    for (const g of groups) {
      if (!g.partitions.length) rows.push(h('tr', {}, h('td', {}, g.group), h('td', { colspan: 6, class: 'empty' }, `${g.members.length} members, no offsets yet`)));
      for (const p of g.partitions) {
        rows.push(h('tr', {}, h('td', {}, g.group), h('td', {}, p.topic), h('td', {}, p.partition), h('td', {}, dash(p.owner)),
          h('td', {}, dash(p.offset)), h('td', {}, dash(p.log_end)), h('td', {}, dash(p.lag))));
      }
    }
    document.querySelector('#groups tbody').replaceChildren(...(rows.length ? rows : [h('tr', {}, h('td', { colspan: 7, class: 'empty' }, 'no consumer groups in ZooKeeper'))]));
  } catch (e) {
    say(`Topics: ${e.message}`, true);
  }
}

// ---- the timeline ----------------------------------------------------------------------------------------

function eventBroker(e) {
  if (Number.isInteger(e.broker)) return e.broker;
  for (const key of ['node', 'source']) {
    const m = /^(broker|controller):(\d+)$/.exec(e[key] || '');
    if (m) return Number(m[2]);
  }
  return null;
}

function eventMatches(e) {
  const f = new FormData(document.getElementById('event-filter'));
  const broker = f.get('broker'); const topic = f.get('topic').trim(); const partition = f.get('partition').trim();
  const kind = f.get('kind');
  if (broker !== '' && eventBroker(e) !== Number(broker)) return false;
  if (topic && e.topic !== topic) return false;
  if (partition !== '' && e.partition !== Number(partition)) return false;
  if (kind && e.kind !== kind) return false;
  return true;
}

function eventItem(e, index) {
  const li = h('li', { 'data-index': index, onclick: () => selectEvent(index) },
    h('span', {}, clock(e.ts)), h('span', { class: 'src' }, e.source || ''), h('span', { class: 'kind' }, e.kind),
    h('span', {}, e.words || ''));
  if (state.replayAt !== null && e.ts > state.replayAt) li.classList.add('future');
  if (state.selected === index) li.classList.add('selected');
  return li;
}

const MAX_LISTED = 2000;  // the timeline list keeps the newest this many matching events in the page
let pending = [];

// Events come in bursts (a loaded broker acknowledges thousands of batches a second): they are taken in
// once per frame, and drawn into the list only while the timeline is on screen.
function receiveEvent(e) {
  pending.push(e);
  if (pending.length === 1) {
    if (document.hidden) setTimeout(flushEvents, 200);
    else requestAnimationFrame(flushEvents);
  }
}

function flushEvents() {
  const batch = pending;
  pending = [];
  if (!batch.length) return;
  const now = Date.now();
  const list = document.getElementById('events');
  const drawing = state.view === 'timeline';
  const atBottom = list.scrollTop + list.clientHeight >= list.scrollHeight - 4;
  const items = [];
  let changed = false;
  for (const e of batch) {
    const index = state.events.length;
    state.events.push(e);
    if (!state.kinds.has(e.kind)) { state.kinds.add(e.kind); changed = true; }
    const b = eventBroker(e);
    if (b !== null && !state.brokers.has(b)) { state.brokers.add(b); changed = true; }
    if (drawing && eventMatches(e)) items.push(eventItem(e, index));
    state.shown.push({ ts: e.ts, kind: e.kind, shownAt: now });
  }
  state.historyStale = true;
  if (changed) refreshFilterOptions();
  if (items.length) {
    list.append(...items);
    while (list.childElementCount > MAX_LISTED) list.firstElementChild.remove();
    if (atBottom) list.scrollTop = list.scrollHeight;
  }
  if (state.shown.length > 100000) state.shown.splice(0, 50000);
  document.getElementById('event-count').textContent = `${state.events.length} events`;
  updateSliderRange();
}

function refreshFilterOptions() {
  const form = document.getElementById('event-filter');
  const fill = (select, values, label) => {
    const chosen = select.value;
    select.replaceChildren(h('option', { value: '' }, 'all'), ...[...values].sort((a, b) => (a < b ? -1 : 1)).map((v) => h('option', { value: v }, label(v))));
    select.value = chosen;
  };
  fill(form.elements.broker, state.brokers, (v) => `broker ${v}`);
  fill(form.elements.kind, state.kinds, (v) => v);
}

function renderEvents() {
  const list = document.getElementById('events');
  const matching = state.events.map((e, i) => [e, i]).filter(([e]) => eventMatches(e)).slice(-MAX_LISTED);
  list.replaceChildren(...matching.map(([e, i]) => eventItem(e, i)));
  list.scrollTop = list.scrollHeight;
}

function selectEvent(index) {
  state.selected = index;
  document.querySelectorAll('#events li.selected').forEach((li) => li.classList.remove('selected'));
  const li = document.querySelector(`#events li[data-index="${index}"]`);
  if (li) li.classList.add('selected');
  highlightSelection();
  if (state.replayAt !== null) setReplay(state.events[index].ts);
}

function highlightSelection() {
  document.querySelectorAll('.touched').forEach((el) => el.classList.remove('touched'));
  if (state.selected === null) return;
  const e = state.events[state.selected];
  const broker = eventBroker(e);
  if (broker !== null) document.querySelectorAll(`[data-broker="${broker}"]`).forEach((el) => el.classList.add('touched'));
  if (typeof e.server === 'number') document.querySelectorAll(`[data-zookeeper="${e.server}"]`).forEach((el) => el.classList.add('touched'));
  if (typeof e.topic === 'string') document.querySelectorAll(`[data-partition="${e.topic}-${e.partition}"]`).forEach((el) => el.classList.add('touched'));
}

// ---- replay ----------------------------------------------------------------------------------------------

function updateSliderRange() {
  const slider = document.getElementById('replay-slider');
  if (!state.events.length) return;
  const first = Math.floor(state.events[0].ts); const last = Math.ceil(state.events[state.events.length - 1].ts);
  const following = state.replayAt === null;
  slider.min = first; slider.max = last; slider.disabled = false;
  if (following) slider.value = last;
}

let replayRequest = 0;
async function setReplay(at) {
  state.replayAt = at;
  document.body.classList.add('replaying');
  document.getElementById('replay-slider').value = at;
  document.getElementById('replay-time').textContent = clock(at);
  document.getElementById('replay-live').disabled = false;
  const live = document.getElementById('live');
  live.className = 'live replay'; live.textContent = `replay at ${clock(at)}`;
  const mine = ++replayRequest;
  try {
    const view = await getJSON(`/api/replay?at=${at}`);
    if (mine !== replayRequest || state.replayAt === null) return;
    renderStrip(view.cluster, true);
    renderPartitions(view.partitions);
  } catch (e) {
    say(`Replay: ${e.message}`, true);
  }
  document.querySelectorAll('#events li').forEach((li) => li.classList.toggle('future', state.events[li.dataset.index].ts > at));
  if (state.view === 'history') renderHistory();
}

function backToLive() {
  state.replayAt = null;
  document.body.classList.remove('replaying');
  document.getElementById('replay-time').textContent = 'live';
  document.getElementById('replay-live').disabled = true;
  document.querySelectorAll('#events li.future').forEach((li) => li.classList.remove('future'));
  setLive(source && source.readyState === EventSource.OPEN);
  if (state.cluster) renderStrip(state.cluster, false);
  renderPartitions(state.partitions);
  updateSliderRange();
  if (state.view === 'history') renderHistory();
}

// ---- history as pictures ---------------------------------------------------------------------------------

async function refreshHistory() {
  if (!state.historyStale && state.history) return renderHistory();
  state.historyStale = false;
  try {
    state.history = await getJSON('/api/history');
  } catch (e) {
    say(`History: ${e.message}`, true);
    return;
  }
  renderHistory();
}

function renderHistory() {
  const box = document.getElementById('history');
  const hist = state.history;
  if (!hist || hist.start === null) {
    box.replaceChildren(h('p', { class: 'empty' }, 'The timeline is empty.'));
    return;
  }
  // a live lab's history reaches to now; a finished run's to its last event
  const live = state.cluster && state.cluster.lab_running && state.replayAt === null;
  const end = Math.max(live ? Date.now() : hist.end, hist.start + 1000);
  const charts = [controllerChart(hist, end)];
  for (const p of hist.partitions) charts.push(partitionChart(hist, p, end));
  if (!hist.partitions.length) charts.push(h('p', { class: 'empty' }, 'No partition events yet (leader changes, ISR changes, HW moves, acknowledgements).'));
  box.replaceChildren(...charts);
}

const W = 1000; const LEFT = 90; const RIGHT = 10;

function scaler(hist, end) {
  return (ts) => LEFT + ((Math.min(ts ?? end, end) - hist.start) / (end - hist.start)) * (W - LEFT - RIGHT);
}

function band(x, start, end, y, height, fill, label, cls) {
  const x0 = x(start); const x1 = x(end);
  const g = s('g', {}, s('rect', { x: x0, y, width: Math.max(1, x1 - x0), height, fill, class: cls }));
  if (label && x1 - x0 > 24) g.append(s('text', { x: x0 + 3, y: y + height - 5, class: 'label' }, label));
  g.append(s('title', {}, `${label || ''} ${clock(start)} – ${end ? clock(end) : 'now'}`));
  return g;
}

function decorations(hist, x, height, end) {
  const g = s('g');
  for (const f of hist.faults) g.append(band(x, f.start, f.end ?? end, 0, height, null, null, 'fault'));
  if (state.replayAt !== null) g.append(s('line', { x1: x(state.replayAt), x2: x(state.replayAt), y1: 0, y2: height, class: 'cursor' }));
  const axis = s('g');
  const ticks = 6;
  for (let i = 0; i <= ticks; i++) {
    const ts = hist.start + ((end - hist.start) * i) / ticks;
    const anchor = i === 0 ? 'start' : i === ticks ? 'end' : 'middle';
    axis.append(s('text', { x: x(ts), y: height - 2, 'text-anchor': anchor }, clock(ts).slice(0, 8)));
  }
  g.append(axis);
  return g;
}

function controllerChart(hist, end) {
  const x = scaler(hist, end);
  const height = 60;
  const svg = s('svg', { viewBox: `0 0 ${W} ${height}`, class: 'chart', 'data-chart': 'controller' });
  svg.append(s('text', { x: 4, y: 22, class: 'lane' }, 'controller'));
  for (const c of hist.controllers) svg.append(band(x, c.start, c.end ?? end, 8, 20, color(c.broker), `broker ${c.broker} · epoch ${c.epoch}`));
  // a KRaft lab's quorum: its leadership epochs in the same lane
  for (const q of hist.quorum || []) svg.append(band(x, q.start, q.end ?? end, 8, 20, color(q.node), `controller ${q.node} · epoch ${q.epoch}`, 'quorum-epoch'));
  svg.append(s('text', { x: 4, y: 44, class: 'lane' }, 'faults'));
  hist.faults.forEach((f, i) => {
    const g = band(x, f.start, f.end ?? end, 32 + (i % 2) * 6, 6, '#f2b705', null);
    g.append(s('title', {}, f.what));
    svg.append(g);
  });
  svg.append(decorations(hist, x, height, end));
  return h('div', { class: 'history-partition' }, h('h3', {}, 'Controller and faults'), svg);
}

function partitionChart(hist, p, end) {
  const x = scaler(hist, end);
  const members = Object.keys(p.isr_members).map(Number);
  const lines = new Set([...Object.keys(p.hw), ...Object.keys(p.log_end)].map(Number));
  const brokers = [...new Set([...members, ...lines])].sort((a, b) => a - b);
  const laneH = 14;
  let y = 4;
  const svg = s('svg', { class: 'chart', 'data-chart': `${p.topic}-${p.partition}` });
  // leadership bands per leader epoch
  svg.append(s('text', { x: 4, y: y + 15, class: 'lane' }, 'leader'));
  for (const b of p.leadership) {
    const none = b.leader === null || b.leader < 0;
    svg.append(band(x, b.start, b.end ?? end, y, 20, none ? '#b3261e' : color(b.leader),
      none ? `no leader · epoch ${b.leader_epoch}` : `${b.leader} · epoch ${b.leader_epoch}`));
  }
  y += 26;
  // ISR membership lanes
  for (const b of brokers) {
    svg.append(s('text', { x: 4, y: y + 11, class: 'lane' }, `ISR ${b}`));
    for (const [start, stop] of p.isr_members[b] || []) svg.append(band(x, start, stop ?? end, y + 2, laneH - 4, color(b), null));
    y += laneH;
  }
  y += 6;
  // HW (solid) and log end (dashed) per broker
  const all = [...Object.values(p.hw), ...Object.values(p.log_end)].flat();
  if (all.length) {
    const top = y; const height = 80;
    const max = Math.max(1, ...all.map((pt) => pt[1]));
    const yOf = (v) => top + height - (v / max) * height;
    svg.append(s('text', { x: 4, y: top + 12, class: 'lane' }, `offset ≤ ${max}`));
    svg.append(s('line', { x1: LEFT, x2: W - RIGHT, y1: top + height, y2: top + height, class: 'axis' }));
    const path = (points) => {
      let d = '';
      let last = null;
      for (const [ts, v] of points) {
        d += last === null ? `M${x(ts)},${yOf(v)}` : `H${x(ts)}V${yOf(v)}`;
        last = v;
      }
      return points.length ? `${d}H${x(end)}` : '';
    };
    for (const [b, points] of Object.entries(p.hw)) svg.append(s('path', { d: path(points), class: 'hw', stroke: color(Number(b)) }, s('title', {}, `HW on broker ${b}`)));
    for (const [b, points] of Object.entries(p.log_end)) svg.append(s('path', { d: path(points), class: 'leo', stroke: color(Number(b)) }, s('title', {}, `log end on broker ${b}`)));
    for (const t of p.truncations) svg.append(s('circle', { cx: x(t.ts), cy: yOf(t.to ?? 0), r: 4, fill: '#b3261e' }, s('title', {}, `broker ${t.broker} truncated to ${t.to} (${t.reason})`)));
    y += height + 8;
  }
  // acknowledged writes per second, and the gaps
  const ackTop = y; const ackH = 40;
  svg.append(s('text', { x: 4, y: ackTop + 14, class: 'lane' }, 'acks/s'));
  const most = Math.max(1, ...p.acks.map((a) => a[1]));
  for (const [bucket, n] of p.acks) {
    const hgt = (n / most) * ackH;
    svg.append(s('rect', { x: x(bucket), y: ackTop + ackH - hgt, width: Math.max(1, x(bucket + 1000) - x(bucket) - 1), height: hgt, class: 'ack' }, s('title', {}, `${n} acknowledged at ${clock(bucket)}`)));
  }
  for (const g of [...p.ack_gaps, ...p.no_leader]) svg.append(band(x, g.start, g.end ?? end, ackTop, ackH, null, null, 'gap'));
  y += ackH + 16;
  svg.append(decorations(hist, x, y, end));
  svg.setAttribute('viewBox', `0 0 ${W} ${y}`);
  return h('div', { class: 'history-partition', 'data-partition': `${p.topic}-${p.partition}` }, h('h3', {}, `${p.topic}-${p.partition}`), svg);
}

// ---- the ZooKeeper tree ----------------------------------------------------------------------------------

async function zkChildren(path, ul) {
  try {
    const node = await getJSON(`/api/zookeeper?path=${encodeURIComponent(path)}`);
    ul.replaceChildren(...node.children.map((name) => zkItem(path === '/' ? `/${name}` : `${path}/${name}`, name)));
  } catch (e) {
    ul.replaceChildren(h('li', { class: 'empty' }, e.message));
  }
}

function zkItem(path, name) {
  const children = h('ul', { hidden: true });
  const toggle = h('span', { class: 'toggle' }, '▸');
  const label = h('span', { class: 'znode', 'data-path': path }, name);
  const li = h('li', {}, toggle, label, children);
  const open = async () => {
    const opening = children.hidden;
    children.hidden = !opening;
    toggle.textContent = opening ? '▾' : '▸';
    if (opening) await zkChildren(path, children);
  };
  toggle.addEventListener('click', open);
  label.addEventListener('click', () => { showZnode(path); if (children.hidden) open(); });
  return li;
}

async function showZnode(path) {
  state.zkSelected = path;
  document.querySelectorAll('.znode.selected').forEach((el) => el.classList.remove('selected'));
  document.querySelectorAll(`.znode[data-path="${CSS.escape(path)}"]`).forEach((el) => el.classList.add('selected'));
  const box = document.getElementById('zk-node');
  try {
    const node = await getJSON(`/api/zookeeper?path=${encodeURIComponent(path)}`);
    const stat = node.stat;
    const rows = Object.entries(stat).map(([k, v]) => h('tr', {}, h('td', {}, k),
      h('td', { class: k === 'ephemeralOwner' && v ? 'ephemeral mono' : 'mono' }, k.endsWith('time') ? `${v} (${clock(v)})` : dash(v))));
    let data = node.data;
    if (node.encoding === 'utf-8' && data) { try { data = JSON.stringify(JSON.parse(data), null, 1); } catch { /* not JSON: as stored */ } }
    box.replaceChildren(h('h3', { class: 'mono' }, path),
      h('pre', { class: 'data' }, data === null || data === '' ? '(no data)' : data),
      node.encoding === 'base64' ? h('p', {}, '(binary data, base64)') : null,
      h('table', { class: 'stat' }, rows), h('p', {}, `${node.children.length} children`));
  } catch (e) {
    box.replaceChildren(h('p', { class: 'empty' }, `${path}: ${e.message}`));
  }
}

// ---- the faults form -------------------------------------------------------------------------------------

function fillFaultForm() {
  const form = document.getElementById('partition-form');
  if (!state.cluster) return;
  const nodes = state.cluster.mode === 'kraft'
    ? [...state.cluster.quorum.voters.map((v) => `controller:${v.id}`), ...state.cluster.brokers.map((b) => `broker:${b.id}`), 'clients']
    : [...state.cluster.brokers.map((b) => `broker:${b.id}`), 'zookeeper',
      ...state.cluster.zookeepers.map((z) => `zookeeper:${z.id}`), 'clients'];
  for (const select of [form.elements.node, form.elements.from]) {
    if (select.options.length === nodes.length) continue;
    select.replaceChildren(...nodes.map((n) => h('option', { value: n }, n)));
  }
}

// ---- scenarios -------------------------------------------------------------------------------------------

const VERDICTS = ['ok', 'lost', 'divergent', 'duplicated', 'stuck', 'unavailable', 'slow'];
state.scenario = null;
state.catalogue = [];

async function loadCatalogue() {
  const form = document.getElementById('scenario-form');
  try {
    state.catalogue = await getJSON('/api/scenarios');
  } catch (e) {
    say(`Scenarios: ${e.message}`, true);
    return;
  }
  form.elements.name.replaceChildren(...state.catalogue.map((c) => h('option', { value: c.name }, `${c.name} (${c.source})`)));
  form.elements.predict.replaceChildren(h('option', { value: '' }, '(no prediction)'), ...VERDICTS.map((v) => h('option', { value: v }, v)));
  describeChoice();
}

function describeChoice() {
  const form = document.getElementById('scenario-form');
  const c = state.catalogue.find((x) => x.name === form.elements.name.value);
  if (!c) return;
  for (const option of form.elements.mode.options) option.disabled = !c.modes.includes(option.value);
  if (!c.modes.includes(form.elements.mode.value)) form.elements.mode.value = c.modes[0];
  document.getElementById('scenario-summary').textContent = `${c.summary}. ${c.why[form.elements.mode.value] || ''}`;
}

async function scenarioCommand(body) {
  try {
    renderScenario(await post('/api/scenario', body));
  } catch (e) {
    say(`Scenario: ${e.message}`, true);
  }
}

async function refreshScenario() {
  try {
    renderScenario(await getJSON('/api/scenario'));
  } catch (e) {
    say(`Scenario: ${e.message}`, true);
  }
}

let lastScenario = '';
function renderScenario(s) {
  const text = JSON.stringify(s);
  if (text === lastScenario) return;  // re-render only what changed (a button must not vanish mid-click)
  lastScenario = text;
  state.scenario = s;
  const active = s.state !== 'idle' && s.state !== 'finished';
  document.getElementById('scenario-step').disabled = !active || s.playing;
  document.getElementById('scenario-play').disabled = !active || s.playing;
  document.getElementById('scenario-pause').disabled = !active || !s.playing;
  document.getElementById('scenario-stop').disabled = !active;
  document.querySelector('#scenario-form button[name=start]').disabled = active;
  if (s.state === 'idle') return;
  document.getElementById('scenario-state').textContent = `${s.scenario} (${s.mode}): ${s.state}`
    + (s.state === 'waiting' ? ` before step ${s.current + 1}` : '') + (s.playing && s.state !== 'finished' ? ', playing' : '') + (s.error ? ` (${s.error})` : '');
  document.getElementById('scenario-steps').replaceChildren(...s.steps.map((step) => {
    const classes = ['scenario-step'];
    if (step.index === s.current) classes.push('current');
    const li = h('li', { class: classes.join(' '), 'data-step': step.index },
      h('div', {}, h('b', {}, step.text)), step.narrate ? h('div', { class: 'narration' }, step.narrate) : null);
    if (step.question) {
      const box = h('div', { class: 'predict' }, h('span', {}, step.question), ' ');
      if (step.prediction === null || step.prediction === undefined) {
        box.append(h('button', { type: 'button', 'data-answer': 'yes', onclick: () => scenarioCommand({ action: 'predict', step: step.index, answer: true }) }, 'Yes, it will'), ' ',
          h('button', { type: 'button', 'data-answer': 'no', onclick: () => scenarioCommand({ action: 'predict', step: step.index, answer: false }) }, 'No'));
      } else {
        box.append(`You predicted: ${step.prediction ? 'yes' : 'no'}. `);
      }
      if (step.held !== undefined) {
        const right = step.prediction === undefined || step.prediction === null ? null : step.prediction === step.held;
        box.append(h('b', { class: step.held ? 'verdict-ok' : 'verdict-bad', 'data-held': String(step.held) }, step.held ? 'It held.' : 'It did not hold.'),
          right === null ? '' : (right ? ' You were right.' : ' You were wrong: look at the views above to see why.'));
      }
      li.append(box);
    }
    return li;
  }));
  const log = document.getElementById('scenario-narration');
  log.replaceChildren(...s.narration.map((n) => h('li', {}, h('span', {}, clock(n.ts)), h('span', {}, ''), h('span', {}, ''), h('span', {}, n.text))));
  log.scrollTop = log.scrollHeight;
  const result = document.getElementById('scenario-result');
  if (s.result) {
    const verdict = s.result.runs ? s.result.runs[0].verdict : s.result.verdict;
    result.replaceChildren(h('p', {},
      'The checker found: ', h('b', { id: 'scenario-verdict', class: verdict === 'ok' ? 'verdict-ok' : 'verdict-bad' }, verdict),
      ` (the ${s.mode} form is expected to be ${s.result.expect}; ${s.result.acknowledged} acknowledged, ${s.result.lost} lost, `
      + `${s.result.divergent} divergent, ${s.result.duplicated} duplicated, longest unavailability ${s.result.unavailable_ms_max} ms). `,
      s.predicted_verdict ? (s.predicted_verdict === verdict ? 'You predicted it.' : `You predicted ${s.predicted_verdict}.`) : ''),
    h('ul', {}, s.result.losses.map((l) => h('li', {}, `${l.topic}-${l.partition} offset ${l.offset}: ${l.cause}`))),
    h('p', {}, 'The run\'s lab keeps running: drag the time slider to replay it.'));
  } else {
    result.replaceChildren();
  }
}

function watchScenario() {
  const s = state.scenario;
  if (state.view === 'scenarios' || (s && s.state !== 'idle' && s.state !== 'finished')) refreshScenario();
}

// ---- lessons ---------------------------------------------------------------------------------------------

state.lesson = null;
state.course = [];

async function loadCourse() {
  try {
    state.course = await getJSON('/api/lessons');
  } catch (e) {
    say(`Lessons: ${e.message}`, true);
    return;
  }
  const select = document.getElementById('lesson-form').elements.name;
  select.replaceChildren(...state.course.map((l) => h('option', { value: l.name }, `${l.title} (${l.minutes} min)`)));
  describeLesson();
}

function describeLesson() {
  const name = document.getElementById('lesson-form').elements.name.value;
  const l = state.course.find((x) => x.name === name);
  if (l) document.getElementById('lesson-summary').textContent = `${l.summary} (${l.pages} pages)`;
}

async function lessonCommand(body) {
  try {
    renderLesson(await post('/api/lesson', body));
  } catch (e) {
    say(`Lesson: ${e.message}`, true);
  }
}

async function refreshLesson() {
  try {
    renderLesson(await getJSON('/api/lesson'));
  } catch (e) {
    say(`Lesson: ${e.message}`, true);
  }
}

let lastLesson = '';
function renderLesson(s) {
  const text = JSON.stringify(s);
  if (text === lastLesson) return;  // re-render only what changed (a button must not vanish mid-click)
  lastLesson = text;
  state.lesson = s;
  const active = s.state !== 'idle' && s.state !== 'finished';
  document.querySelector('#lesson-form button[name=start]').disabled = active;
  document.getElementById('lesson-stop').disabled = !active;
  if (s.state === 'idle') return;
  document.getElementById('lesson-state').textContent = `${s.title}: `
    + (s.state === 'finished' ? 'finished' : s.waiting === 'answer' ? 'your answer, please' : s.waiting === 'next' ? 'press Next' : 'the steps run')
    + (s.error ? ` (${s.error})` : '');
  const last = s.pages.length - 1;
  document.getElementById('lesson-pages').replaceChildren(...s.pages.map((p, i) => {
    const li = h('li', { class: `lesson-page${i === last && s.state !== 'finished' ? ' current' : ''}`, 'data-page': i },
      h('h3', {}, `${i + 1}/${s.of} ${p.title}`), h('p', {}, p.text),
      p.look ? h('p', { class: 'look' }, h('b', {}, 'Look: '), p.look) : null);
    const q = p.question;
    if (q) {
      const asking = i === last && s.waiting === 'answer';
      const box = h('div', { class: 'question', 'data-kind': q.kind },
        h('p', {}, h('b', {}, q.kind === 'predict' ? 'Predict: ' : 'Question: '), q.ask));
      box.append(h('ol', { class: 'choices' }, q.choices.map((c, n) => h('li', {},
        h('button', { type: 'button', 'data-choice': n + 1, disabled: !asking,
          class: p.answer === n + 1 ? 'chosen' : '', onclick: () => lessonCommand({ action: 'answer', choice: n + 1 }) }, c)))));
      if (q.right !== undefined) {
        box.append(h('p', { class: `reveal ${p.correct ? 'verdict-ok' : 'verdict-bad'}`, 'data-correct': String(p.correct) },
          p.correct ? 'Right. ' : `The answer is ${q.right}: ${q.choices[q.right - 1]}. `, q.why));
      } else if (p.answer && q.kind === 'predict') {
        box.append(h('p', { class: 'pending' }, 'Your prediction is in: watch the views above while the steps run.'));
      }
      li.append(box);
    }
    if (p.closed && p.held !== undefined) {
      li.append(h('p', { class: p.held ? 'verdict-ok' : 'verdict-bad', 'data-held': String(p.held) },
        p.held ? 'What happened: every claim held.' : `What happened: ${p.failures.join('; ')}`));
    }
    if (i === last && s.waiting === 'next') {
      li.append(h('button', { type: 'button', id: 'lesson-next', onclick: () => lessonCommand({ action: 'next' }) }, 'Next'));
    }
    return li;
  }));
  const log = document.getElementById('lesson-narration');
  log.replaceChildren(...s.narration.map((n) => h('li', {}, h('span', {}, clock(n.ts)), h('span', {}, ''), h('span', {}, ''), h('span', {}, n.text))));
  log.scrollTop = log.scrollHeight;
  const result = document.getElementById('lesson-result');
  result.replaceChildren(...(s.result ? [h('p', { id: 'lesson-passed', 'data-passed': String(s.result.passed) },
    s.result.passed ? 'Lesson done: every claim it made held on the cluster. Its lab keeps running: drag the time slider to replay it.'
      : 'Lesson done, but a claim did not hold: see the pages above.')] : []));
}

function watchLesson() {
  const s = state.lesson;
  if (state.view === 'lessons' || (s && s.state !== 'idle' && s.state !== 'finished')) refreshLesson();
}

// ---- side by side: one scenario on a ZooKeeper lab and a KRaft lab ---------------------------------------

state.compare = null;
state.comparable = [];

async function loadComparable() {
  try {
    state.comparable = await getJSON('/api/comparable');
  } catch (e) {
    say(`Side by side: ${e.message}`, true);
    return;
  }
  const form = document.getElementById('compare-form');
  form.elements.name.replaceChildren(...state.comparable.map((c) => h('option', { value: c.name }, `${c.name} (${c.source})`)));
  describeCompare();
}

function describeCompare() {
  const form = document.getElementById('compare-form');
  const c = state.comparable.find((x) => x.name === form.elements.name.value);
  if (!c) return;
  const keep = (select, modes) => {
    const was = select.value;
    select.replaceChildren(...modes.map((m) => h('option', { value: m }, m)));
    if (modes.includes(was)) select.value = was;
  };
  keep(form.elements.zookeeper, c.zookeeper_modes);
  keep(form.elements.kraft, c.kraft_modes);
  document.getElementById('compare-summary').textContent = `${c.summary}.`;
}

async function compareCommand(body) {
  try {
    renderCompare(await post('/api/compare', body));
  } catch (e) {
    say(`Side by side: ${e.message}`, true);
  }
}

async function refreshCompare() {
  try {
    renderCompare(await getJSON('/api/compare'));
  } catch (e) {
    say(`Side by side: ${e.message}`, true);
  }
}

const seconds = (ms) => `${(ms / 1000).toFixed(1)} s`;
const DESIGN_WORDS = { zookeeper: 'ZooKeeper lab', kraft: 'KRaft lab' };

let lastCompare = '';
function renderCompare(c) {
  const text = JSON.stringify(c);
  if (text === lastCompare) return;
  lastCompare = text;
  state.compare = c;
  const running = c.state === 'running';
  document.querySelector('#compare-form button[name=start]').disabled = running;
  document.getElementById('compare-stop').disabled = !running;
  if (c.state === 'idle') return;
  document.getElementById('compare-state').textContent = `${c.scenario}: ${c.state}`;
  document.getElementById('compare-chart').replaceChildren(compareChart(c.sides));
  const labels = [...new Set(c.sides.flatMap((side) => side.milestones.map((m) => m.label)))];
  document.querySelector('#compare-milestones tbody').replaceChildren(...(labels.length ? labels.map((label) => h('tr', { 'data-milestone': label },
    h('td', {}, label), ...c.sides.map((side) => {
      const m = side.milestones.find((x) => x.label === label);
      return h('td', { 'data-design': side.design }, m ? seconds(m.at) : '–');
    }))) : [h('tr', {}, h('td', { colspan: 3, class: 'empty' }, 'no fault yet'))]));
  document.getElementById('compare-sides').replaceChildren(...c.sides.map((side) => h('div', { class: 'compare-side', 'data-design': side.design },
    h('h3', {}, `${DESIGN_WORDS[side.design]} (${side.mode})`, ' ',
      side.verdict ? h('b', { class: side.expected ? 'verdict-ok' : 'verdict-bad', 'data-verdict': side.verdict }, side.verdict) : h('span', {}, side.error || side.state)),
    h('p', { class: 'teach' }, side.why),
    side.failures && side.failures.length ? h('ul', { class: 'mismatch-list' }, side.failures.map((f) => h('li', {}, f))) : null,
    side.fault ? h('p', {}, 'The fault: ', h('b', {}, side.fault.what), ` at ${clock(side.fault.ts)}`) : null,
    h('ol', { class: 'events' }, side.events.map((e) => h('li', {},
      h('span', {}, e.at >= 0 ? `+${seconds(e.at)}` : `−${seconds(-e.at)}`), h('span', { class: 'src' }, e.source), h('span', { class: 'kind' }, e.kind), h('span', {}, e.words)))))));
}

const LANE_H = 84;
const LANE_AXIS = 64;  // a lane's time line, below the rows of milestone labels
function compareChart(sides) {
  const all = sides.flatMap((side) => [...side.events.map((e) => e.at), ...side.milestones.map((m) => m.at)]);
  const lo = Math.min(-1000, ...all);
  const hi = Math.max(1000, ...all) + 500;
  const x = (at) => LEFT + 40 + ((at - lo) / (hi - lo)) * (W - LEFT - 40 - RIGHT - 60);
  const height = sides.length * LANE_H + 24;
  const svg = s('svg', { viewBox: `0 0 ${W} ${height}`, class: 'chart', 'data-chart': 'compare' });
  sides.forEach((side, i) => {
    const y = i * LANE_H;
    const lane = s('g', { class: 'lane', 'data-design': side.design });
    lane.append(s('text', { x: 4, y: y + LANE_AXIS - 12, class: 'lane' }, DESIGN_WORDS[side.design]), s('text', { x: 4, y: y + LANE_AXIS + 2, class: 'lane' }, `(${side.mode})`));
    lane.append(s('line', { x1: x(lo), x2: x(hi), y1: y + LANE_AXIS, y2: y + LANE_AXIS, class: 'lane-axis' }));
    for (const e of side.events) {
      lane.append(s('line', { x1: x(e.at), x2: x(e.at), y1: y + LANE_AXIS - 8, y2: y + LANE_AXIS + 8, class: `tick kind-${e.kind}` }, s('title', {}, `${seconds(e.at)}: ${e.words}`)));
    }
    side.milestones.forEach((m, j) => {
      // one row of label per milestone, right of its dot (left of it near the right edge)
      const right = x(m.at) > W * 0.7;
      const g = s('g', { class: 'milestone', 'data-label': m.label, 'data-at': m.at });
      g.append(s('line', { x1: x(m.at), x2: x(m.at), y1: y + 16 + j * 14, y2: y + LANE_AXIS, class: 'milestone-stem' }),
        s('circle', { cx: x(m.at), cy: y + LANE_AXIS, r: 5 }),
        s('text', { x: x(m.at) + (right ? -5 : 5), y: y + 14 + j * 14, 'text-anchor': right ? 'end' : 'start' }, `${m.label} ${seconds(m.at)}`));
      lane.append(g);
    });
    svg.append(lane);
  });
  svg.append(s('line', { x1: x(0), x2: x(0), y1: 0, y2: height - 18, class: 'fault-line' }),
    s('text', { x: x(0) + 3, y: height - 20, class: 'label' }, 'fault'));
  const axis = s('g', { class: 'axis' });
  const step = (hi - lo) > 20000 ? 5000 : (hi - lo) > 8000 ? 2000 : 1000;
  for (let t = Math.ceil(lo / step) * step; t <= hi; t += step) {
    axis.append(s('text', { x: x(t), y: height - 4, 'text-anchor': 'middle' }, `${t / 1000} s`));
  }
  svg.append(axis);
  return svg;
}

function watchCompare() {
  const c = state.compare;
  if (state.view === 'compare' && (!c || c.state === 'running')) refreshCompare();
}

// ---- security: principals per listener, quotas and throttles ------------------------------------------------

function rate(q, v) {
  if (v === null || v === undefined) return '–';
  return q.quota === 'request_percentage' ? `${Number(v).toFixed(1)} %` : `${Math.round(v).toLocaleString('en')} B/s`;
}

async function refreshSecurity() {
  let sec;
  try {
    sec = await getJSON('/api/security');
  } catch (e) {
    say(`Security: ${e.message}`, true);
    return;
  }
  document.getElementById('security-summary').textContent = `Listeners speak ${sec.protocol}`
    + (sec.mechanisms.length ? ` (SASL mechanisms: ${sec.mechanisms.join(', ')})` : '') + '; connected now: '
    + (sec.principals.length ? sec.principals.map((p) => `${p.principal} × ${p.connections}`).join(', ') : 'nobody') + '.';
  document.querySelector('#connections tbody').replaceChildren(...(sec.connections.length ? sec.connections.map((c) => h('tr', {
    'data-broker': c.broker, 'data-principal': c.principal, 'data-listener': c.listener,
  }, h('td', {}, c.broker), h('td', {}, c.listener, c.security_protocol !== c.listener ? ` (${c.security_protocol})` : ''),
  h('td', { class: c.authenticated ? '' : 'why' }, c.principal, c.authenticated ? '' : ' (authenticating)'),
  h('td', {}, dash(c.client_id)), h('td', {}, c.address))) : [h('tr', {}, h('td', { colspan: 5, class: 'empty' }, 'no connections (or no broker answers)'))]));
  document.querySelector('#quotas tbody').replaceChildren(...(sec.quotas.length ? sec.quotas.map((q) => h('tr', {
    'data-broker': q.broker, 'data-user': dash(q.user), 'data-quota': q.quota, class: q.throttled ? 'throttled' : '',
  }, h('td', {}, q.broker), h('td', {}, q.quota), h('td', {}, dash(q.user)), h('td', {}, dash(q.client_id)),
  h('td', {}, rate(q, q.bound)), h('td', {}, rate(q, q.rate)),
  h('td', { class: 'throttle' }, q.throttle_ms ? `${q.throttle_ms} ms, ${q.throttled_s_ago} s ago` : 'never'))) : [h('tr', {}, h('td', { colspan: 7, class: 'empty' }, 'no quota in use'))]));
}

// ---- views and the live stream ---------------------------------------------------------------------------

function showView(name) {
  state.view = name;
  document.querySelectorAll('.tabs button').forEach((b) => b.setAttribute('aria-selected', String(b.dataset.view === name)));
  document.querySelectorAll('main .view').forEach((v) => { v.hidden = v.dataset.view !== name; });
  if (name === 'topics') refreshTopics();
  if (name === 'security') refreshSecurity();
  if (name === 'history') refreshHistory();
  if (name === 'zookeeper') {
    const tree = document.getElementById('zk-tree');
    if (!tree.children.length) zkChildren('/', tree);
    else if (state.zkSelected) showZnode(state.zkSelected);
  }
  if (name === 'faults') fillFaultForm();
  if (name === 'timeline') renderEvents();
  if (name === 'scenarios') { if (!state.catalogue.length) loadCatalogue(); refreshScenario(); }
  if (name === 'lessons') { if (!state.course.length) loadCourse(); refreshLesson(); }
  if (name === 'compare') { if (!state.comparable.length) loadComparable(); refreshCompare(); }
}

function setLive(on) {
  if (state.replayAt !== null) return;
  const live = document.getElementById('live');
  live.className = `live ${on ? 'on' : 'off'}`;
  live.textContent = on ? 'live' : 'reconnecting…';
}

let source = null;

// Appends, acknowledgements and HW samples come by the thousand under load: the live list leaves them out unless asked.
const BUSY_KINDS = 'produce_appended,produce_acked,hw_moved';

function connect() {
  const busy = document.getElementById('event-filter').elements.busy.checked;
  source = new EventSource(`/api/events/stream?words=1${busy ? '' : `&exclude=${BUSY_KINDS}`}`);
  source.onopen = () => setLive(true);
  source.onerror = () => setLive(false);
  source.onmessage = (m) => receiveEvent(JSON.parse(m.data));
  source.addEventListener('cluster', (m) => {
    state.cluster = JSON.parse(m.data);
    if (state.replayAt === null) renderStrip(state.cluster, false);
    if (state.view === 'faults') fillFaultForm();
  });
  source.addEventListener('lab', (m) => {
    // the dashboard now shows another lab (a scenario's): start its timeline afresh
    document.querySelector('.lab-dir').textContent = JSON.parse(m.data).dir;
    pending = []; state.events = []; state.kinds.clear(); state.brokers.clear(); state.selected = null;
    state.history = null; state.historyStale = true;
    document.getElementById('events').replaceChildren();
    if (state.replayAt !== null) backToLive();
  });
  source.addEventListener('partitions', (m) => {
    state.partitions = JSON.parse(m.data);
    if (state.replayAt === null) renderPartitions(state.partitions);
  });
}

function init() {
  document.querySelectorAll('.tabs button').forEach((b) => b.addEventListener('click', () => showView(b.dataset.view)));
  document.getElementById('event-filter').addEventListener('input', (e) => {
    if (e.target.name !== 'busy') return renderEvents();
    source.close();  // a stream with the other kinds: the timeline starts afresh from its backlog
    pending = []; state.events = []; state.kinds.clear(); state.brokers.clear(); state.selected = null;
    document.getElementById('events').replaceChildren();
    connect();
  });
  document.getElementById('event-filter').addEventListener('submit', (e) => e.preventDefault());
  document.getElementById('replay-slider').addEventListener('input', (e) => setReplay(Number(e.target.value)));
  document.getElementById('replay-live').addEventListener('click', backToLive);
  document.getElementById('partition-form').addEventListener('submit', (e) => {
    e.preventDefault();
    const form = e.target;
    const from = [...form.elements.from.selectedOptions].map((o) => o.value);
    fault({ action: 'partition', node: form.elements.node.value, from, one_way: form.elements.one_way.checked }, form.querySelector('button[type=submit]'));
  });
  document.getElementById('heal-all').addEventListener('click', (e) => fault({ action: 'heal' }, e.currentTarget));
  const scenarioForm = document.getElementById('scenario-form');
  scenarioForm.elements.name.addEventListener('change', describeChoice);
  scenarioForm.elements.mode.addEventListener('change', describeChoice);
  scenarioForm.addEventListener('submit', (e) => {
    e.preventDefault();
    const f = e.target.elements;
    scenarioCommand({ action: 'start', name: f.name.value, mode: f.mode.value, predict: f.predict.value || null, ask: f.ask.checked });
  });
  document.getElementById('scenario-step').addEventListener('click', () => scenarioCommand({ action: 'step' }));
  document.getElementById('scenario-play').addEventListener('click', () => scenarioCommand({ action: 'play' }));
  document.getElementById('scenario-pause').addEventListener('click', () => scenarioCommand({ action: 'pause' }));
  document.getElementById('scenario-stop').addEventListener('click', () => scenarioCommand({ action: 'stop' }));
  const lessonForm = document.getElementById('lesson-form');
  lessonForm.elements.name.addEventListener('change', describeLesson);
  lessonForm.addEventListener('submit', (e) => {
    e.preventDefault();
    lessonCommand({ action: 'start', name: e.target.elements.name.value });
  });
  document.getElementById('lesson-stop').addEventListener('click', () => lessonCommand({ action: 'stop' }));
  const compareForm = document.getElementById('compare-form');
  compareForm.elements.name.addEventListener('change', describeCompare);
  compareForm.addEventListener('submit', (e) => {
    e.preventDefault();
    const f = e.target.elements;
    compareCommand({ action: 'start', name: f.name.value, modes: [f.zookeeper.value, f.kraft.value] });
  });
  document.getElementById('compare-stop').addEventListener('click', () => compareCommand({ action: 'stop' }));
  setInterval(() => { if (!document.hidden) { watchScenario(); watchLesson(); watchCompare(); } }, 700);
  setInterval(() => {
    if (document.hidden) return;
    if (state.view === 'topics') refreshTopics();
    if (state.view === 'security') refreshSecurity();
    if (state.view === 'history' && state.historyStale) refreshHistory();
    if (state.view === 'zookeeper' && state.zkSelected) showZnode(state.zkSelected);
  }, 2000);
  connect();
  document.dispatchEvent(new CustomEvent('dashboard-ready'));
}

init();
