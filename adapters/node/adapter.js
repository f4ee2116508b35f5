#!/usr/bin/env node
'use strict';
// node-mini: a small durable chat runtime in plain Node.js (no npm packages), and its recoverykit adapter.
// This process is the adapter and the control service: it reads the kit's requests as JSON lines on
// stdin, saves user controls in the store (state.json, fsync + atomic rename) before it acknowledges
// them, and answers on stdout. The work is done by a separate worker process (worker.js) that the kit
// may kill at any moment. See README.md.
//
//   node adapters/node/adapter.js

const fs = require('node:fs');
const path = require('node:path');
const readline = require('node:readline');
const crypto = require('node:crypto');
const { spawn } = require('node:child_process');
const { Store, addMessage, now } = require('./store');
const { createTime, alive, sleep } = require('./proc');

const PROTOCOL = '1.3';
const RESTART_KINDS = ['frontend_reload', 'normal_exit', 'graceful_worker_restart', 'stop_all_exit'];
const FAILPOINTS = ['provider.request.before', 'provider.request.after', 'usage.persist.before',
  'usage.persist.after', 'tool.dispatch.before', 'tool.dispatch.after', 'tool.result.commit.before',
  'tool.result.commit.after', 'completion.commit.before_projection', 'recovery.repair.after'];
const OBSERVES = ['work_items', 'turns', 'tool_calls', 'usage_receipts', 'leases'];
const NULL_SECTIONS = ['goals', 'approvals', 'waits', 'fenced_writes', 'runs'];

class Refused extends Error {
  constructor(code, text, definite = true) {
    super(text);
    this.code = code;
    this.definite = definite;
  }
}

const find = (list, key, value) => list.find((r) => r[key] === value);
const newId = (prefix) => `${prefix}-${crypto.randomBytes(4).toString('hex')}`;

class Runtime {
  constructor() {
    this.store = null;
    this.worker = null; // {child, pid, created}
    this.env = { failpoints: '', clock_offset_s: 0, host_id: 'host-a' };
  }

  // --- lifecycle -------------------------------------------------------------------------------------

  init(req) {
    this.dataDir = req.data_dir;
    this.marker = req.run_marker;
    this.socket = req.failpoint_socket;
    this.store = new Store(this.dataDir);
    this.cfg = { provider_base_url: req.provider_base_url, tools: req.probe_tools, model: req.model ?? null,
      api_key: req.api_key ?? null };
    this.saveConfig();
    return { name: 'node-mini', version: '0.1.0', protocol_version: PROTOCOL, profiles: ['chat_core'],
      failpoints: FAILPOINTS, restart_kinds: RESTART_KINDS, observes: OBSERVES };
  }

  saveConfig() {
    const tmp = path.join(this.dataDir, 'config.json.tmp');
    fs.writeFileSync(tmp, JSON.stringify(this.cfg));
    fs.renameSync(tmp, path.join(this.dataDir, 'config.json'));
  }

  configure(req) {
    for (const key of ['failpoints', 'clock_offset_s', 'host_id']) {
      if (req[key] !== null && req[key] !== undefined) this.env[key] = req[key];
    }
    if (req.probe_tools) { // protocol 1.1: the tools as they are now
      this.cfg.tools = req.probe_tools;
      this.saveConfig();
    }
  }

  workerAlive() {
    const w = this.worker;
    return w !== null && w.child.exitCode === null && w.child.signalCode === null && alive(w.pid, w.created);
  }

  async startWorker() {
    if (this.workerAlive()) return;
    const env = { ...process.env, RECOVERYKIT_RUN_MARKER: this.marker, RECOVERYKIT_FAILPOINTS: this.env.failpoints,
      RECOVERYKIT_FAILPOINT_SOCKET: this.socket, NODE_MINI_HOST_ID: this.env.host_id,
      NODE_MINI_CLOCK_OFFSET_S: String(this.env.clock_offset_s) };
    const child = spawn(process.execPath, [path.join(__dirname, 'worker.js'), this.dataDir],
      { stdio: ['ignore', 2, 2], env });
    child.on('error', () => {});
    this.worker = { child, pid: child.pid, created: createTime(child.pid) };
    const ready = path.join(this.dataDir, `ready-${child.pid}`);
    const deadline = Date.now() + 20000;
    while (!fs.existsSync(ready)) {
      if (child.exitCode !== null || child.signalCode !== null || Date.now() > deadline) {
        throw new Refused('internal', `the worker did not start (${child.exitCode ?? child.signalCode})`, false);
      }
      await sleep(10);
    }
  }

  async stopWorker() {
    const w = this.worker;
    this.worker = null;
    if (w === null || w.child.exitCode !== null || w.child.signalCode !== null) return;
    const exited = new Promise((resolve) => w.child.once('exit', resolve));
    w.child.kill('SIGTERM');
    const timer = setTimeout(() => w.child.kill('SIGKILL'), 10000);
    await exited;
    clearTimeout(timer);
  }

  async start(req) {
    this.configure(req);
    await this.startWorker();
  }

  async stop() {
    await this.stopWorker();
  }

  async restart(req) {
    if (!RESTART_KINDS.includes(req.kind)) throw new Refused('not_supported', `restart kind ${req.kind}: kills are the kit's`);
    if (req.kind === 'frontend_reload') return;
    if (req.kind === 'stop_all_exit') this.stop_all();
    await this.stopWorker();
    this.configure(req);
    await this.startWorker();
  }

  async shutdown() {
    await this.stopWorker();
    for (const [pid, created] of this.toolPids()) {
      if (alive(pid, created)) try { process.kill(pid, 'SIGKILL'); } catch { /* gone */ }
    }
  }

  toolPids() {
    if (this.store === null) return [];
    return this.store.read().tool_calls.filter((c) => c.status === 'dispatched' && c.pid).map((c) => [c.pid, c.create_time]);
  }

  processes() {
    const out = [];
    if (this.workerAlive()) out.push({ role: 'worker', pid: this.worker.pid, create_time: this.worker.created });
    for (const [pid, created] of this.toolPids()) {
      if (alive(pid, created)) out.push({ role: 'tool', pid, create_time: created });
    }
    return { processes: out };
  }

  // --- user controls: durable before the reply ---------------------------------------------------------

  submit(req) {
    return this.store.tx((s) => {
      const known = find(s.inputs, 'client_msg_id', req.client_msg_id);
      if (known) return { work_id: known.work_id, input_id: known.input_id };
      const workId = newId('w');
      const inputId = newId('in');
      const item = { work_id: workId, session_id: req.session_id, desired: 'run', status: 'queued', reason: 'queued',
        cv: 1, host_id: this.env.host_id, created: now(), progress: 0 };
      s.work.push(item);
      addMessage(s, item, { role: 'user', content: req.text });
      s.inputs.push({ input_id: inputId, client_msg_id: req.client_msg_id, work_id: workId, text: req.text, at: now() });
      return { work_id: workId, input_id: inputId };
    });
  }

  item(s, workId) {
    const item = find(s.work, 'work_id', workId);
    if (item === undefined) throw new Refused('unknown_work_item', `no work item ${JSON.stringify(workId)}`);
    return item;
  }

  halt(s, item, desired, reason) {
    Object.assign(item, { desired, status: desired === 'cancelled' ? 'cancelled' : 'paused', reason, cv: item.cv + 1 });
    for (const t of s.turns) if (t.work_id === item.work_id && t.status === 'active') t.status = 'interrupted';
    for (const l of s.leases) if (l.work_id === item.work_id) l.released = true;
  }

  pause(req) {
    return this.store.tx((s) => {
      const item = this.item(s, req.work_id);
      if (item.desired === 'done' || item.desired === 'cancelled') {
        throw new Refused('precondition_failed', `${item.work_id} is already ${item.desired}`);
      }
      if (item.desired !== 'paused') this.halt(s, item, 'paused', 'user_paused');
      return { work_id: item.work_id, control_version: item.cv };
    });
  }

  resume(req) {
    return this.store.tx((s) => {
      const item = this.item(s, req.work_id);
      if (item.desired !== 'paused') throw new Refused('precondition_failed', `${item.work_id} is ${item.desired}, not paused`);
      Object.assign(item, { desired: 'run', status: 'queued', reason: 'queued', cv: item.cv + 1 });
      return { work_id: item.work_id, control_version: item.cv };
    });
  }

  end(req) {
    return this.store.tx((s) => {
      const item = this.item(s, req.work_id);
      if (item.desired !== 'done' && item.desired !== 'cancelled') this.halt(s, item, 'cancelled', 'user_cancelled');
      return { work_id: item.work_id, control_version: item.cv };
    });
  }

  stop_all() {
    return this.store.tx((s) => {
      const stopped = s.work.filter((w) => w.desired === 'run');
      for (const item of stopped) this.halt(s, item, 'paused', 'user_stopped_all');
      return { stopped: stopped.map((w) => w.work_id) };
    });
  }

  reload() {}

  // --- reading -----------------------------------------------------------------------------------------

  observe() {
    const snap = snapshot(this.store.read());
    for (const section of NULL_SECTIONS) snap[section] = null;
    return { snapshot: snap };
  }

  async quiesce(req) {
    const deadline = Date.now() + req.timeout_s * 1000;
    for (;;) {
      const pending = this.store.read().work
        .filter((w) => w.desired === 'run' && (w.status === 'queued' || w.status === 'running'))
        .map((w) => ({ work_id: w.work_id, status: w.status }));
      if (!pending.length || Date.now() >= deadline) return { quiescent: !pending.length, pending };
      await sleep(30);
    }
  }
}

function snapshot(s) {
  const inputs = (workId) => s.inputs.filter((i) => i.work_id === workId)
    .map((i) => ({ input_id: i.input_id, client_msg_id: i.client_msg_id, text: i.text }));
  return {
    work_items: s.work.map((w) => ({ work_id: w.work_id, session_id: w.session_id, kind: 'chat_request',
      desired_state: w.desired, control_version: w.cv, status: w.status, reason_code: w.reason,
      recovery_policy: 'automatic', host_id: w.host_id, parent_id: null, inputs: inputs(w.work_id),
      last_progress: w.progress ? String(w.progress) : null })),
    turns: s.turns.map((t) => ({ turn_id: t.turn_id, work_id: t.work_id, continuation_key: t.ckey,
      predecessor: t.predecessor, status: t.status })),
    tool_calls: s.tool_calls.map((c) => ({ call_id: c.call_id, work_id: c.work_id, turn_id: c.turn_id, tool: c.tool,
      effect_class: c.effect, status: c.status === 'refused' ? 'never_started' : c.status, pid: c.pid,
      create_time: c.pid ? c.create_time : null, repair_key: c.repair_key })),
    usage_receipts: s.receipts.map((r) => ({ receipt_id: r.request_id, work_id: r.work_id, request_id: r.request_id,
      attempt: r.attempt, goal_id: null, revision: null, prompt_tokens: r.usage === 'unknown' ? null : r.prompt,
      completion_tokens: r.usage === 'unknown' ? null : r.completion, usage: r.usage })),
    leases: s.leases.filter((l) => !l.released).map((l) => ({ work_id: l.work_id,
      owner: { host_id: l.host_id, pid: l.pid, create_time: l.create_time }, generation: l.generation,
      expires_at: null })),
  };
}

// --- the wire: one JSON object per line; requests may overlap, each gets exactly one reply -----------

const OPS = new Set(['init', 'start', 'stop', 'restart', 'shutdown', 'processes', 'submit', 'pause', 'resume', 'end',
  'stop_all', 'reload', 'observe', 'quiesce']);
const runtime = new Runtime();
let sent = 0;
let pending = 0;
let closing = false;

function send(reply) {
  sent += 1;
  process.stdout.write(`${JSON.stringify({ ...reply, msg_id: sent })}\n`);
}

async function handle(line) {
  let req;
  try {
    req = JSON.parse(line);
  } catch {
    process.stderr.write(`node-mini: not JSON, ignored: ${line.slice(0, 200)}\n`);
    return;
  }
  let reply;
  try {
    if (!OPS.has(req.type)) throw new Refused('not_supported', `${req.type} is not implemented (profile chat_core only)`);
    if (req.type !== 'init' && runtime.store === null) throw new Refused('malformed_request', 'init comes first');
    reply = { type: `${req.type}_ok`, ...((await runtime[req.type](req)) || {}) };
  } catch (err) {
    reply = err instanceof Refused
      ? { type: 'error', code: err.code, text: err.message, definite: err.definite }
      : { type: 'error', code: 'internal', text: `${err.name}: ${err.message}`, definite: false };
  }
  send({ ...reply, in_reply_to: req.msg_id });
  if (req.type === 'shutdown') process.exit(0);
}

readline.createInterface({ input: process.stdin, crlfDelay: Infinity })
  .on('line', (line) => {
    pending += 1;
    handle(line).finally(() => {
      pending -= 1;
      if (closing && pending === 0) runtime.shutdown().finally(() => process.exit(0));
    });
  })
  .on('close', () => { // the kit went away without shutdown: leave nothing running
    closing = true;
    if (pending === 0) runtime.shutdown().finally(() => process.exit(0));
  });
