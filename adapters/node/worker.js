'use strict';
// The worker: claims runnable work, calls the kit's provider over HTTP (streaming, with X-Request-Id),
// runs the probe tools as real child processes in their own session, and commits every step to the
// store before it goes on. Started by adapter.js; everything it knows comes from config.json and
// state.json in the data dir, so a SIGKILL loses nothing committed.
//
//   node worker.js DATA_DIR

const fs = require('node:fs');
const path = require('node:path');
const http = require('node:http');
const { spawn } = require('node:child_process');
const { Store, addMessage, now } = require('./store');
const { failpoint } = require('./failpoint');
const { createTime, alive, sleep } = require('./proc');

const POLL_MS = 30;
const BACKOFF_S = 0.25; // the first retry's wait after a temporary provider fault; doubled per fault after it
const MAX_BACKOFF_S = 8;
const SAFE = new Set(['read_only', 'state_probe']); // what may run while an earlier write's outcome is unknown
const UNKNOWN_RESULT = "[outcome unknown: the tool's process ended before its result was committed; "
  + 'do not repeat the write]';

class Stale extends Error {} // the work item changed under us (a user control won): drop this step

class Cut extends Error { // the stream broke off before [DONE]
  constructor(text, usage) {
    super("the provider's stream ended before [DONE]");
    this.text = text;
    this.usage = usage;
  }
}

const find = (list, key, value) => list.find((r) => r[key] === value);

class Worker {
  constructor(dataDir) {
    this.dir = dataDir;
    this.store = new Store(dataDir);
    this.host = process.env.NODE_MINI_HOST_ID || 'host-a';
    this.pid = process.pid;
    this.created = createTime(this.pid);
    this.mine = new Set(); // turns this process opened
    this.idle = false;
    this.stopping = false;
    this.stopped = new Promise((resolve) => { this.onStop = resolve; });
  }

  // SIGTERM is a graceful stop: idle, exit at once; else the step under way goes on to its commit (an answer
  // already received is saved, never asked again), starts no new tool, and stops waiting for a running one.
  stop() {
    this.stopping = true;
    this.onStop();
    if (this.idle) process.exit(0);
  }

  exitIfStopping() {
    if (this.stopping) process.exit(0);
  }

  config() { // re-read at every use: the adapter rewrites it when start brings new tools
    return JSON.parse(fs.readFileSync(path.join(this.dir, 'config.json'), 'utf8'));
  }

  recover() {
    this.store.tx((s) => {
      for (const lease of s.leases.filter((l) => !l.released)) {
        const item = find(s.work, 'work_id', lease.work_id);
        if (!item || item.desired !== 'run') continue;
        if (lease.host_id !== this.host) {
          Object.assign(item, { status: 'waiting', reason: 'owner_on_other_host' });
        } else if (!alive(lease.pid, lease.create_time)
                   && (item.status === 'running' || item.reason === 'owner_on_other_host')) {
          Object.assign(item, { status: 'queued', reason: 'queued' });
        }
      }
    });
  }

  async run() {
    this.recover();
    fs.writeFileSync(path.join(this.dir, `ready-${this.pid}`), '');
    for (;;) {
      if (this.stopping) process.exit(0); // the step under way is committed; admit nothing new
      const item = this.pick(this.store.read());
      if (item === undefined) {
        this.idle = true;
        await sleep(POLL_MS);
        this.idle = false;
        continue;
      }
      try {
        await this.step(this.claim(item));
      } catch (err) {
        if (err instanceof Stale) continue;
        this.fault(item, err);
      }
    }
  }

  // A failed step: a refusal that will not change (HTTP 4xx but 408/409/429) holds the item with its reason;
  // anything else (a cut stream, a 5xx, a refused connection) is retried at a durable time with bounded backoff.
  fault(item, err) {
    const permanent = err.status !== undefined && err.status < 500 && ![408, 409, 429].includes(err.status);
    process.stderr.write(`node-mini-worker: step of ${item.work_id} failed: ${err.message}; `
      + `${permanent ? 'held' : 'retry scheduled'}\n`);
    this.store.tx((s) => {
      const row = find(s.work, 'work_id', item.work_id);
      if (row.desired !== 'run' || row.cv !== item.cv) return;
      if (permanent) {
        Object.assign(row, { status: 'waiting', reason: 'retry_exhausted', retry_at: null });
        for (const l of s.leases) if (l.work_id === item.work_id) l.released = true;
        return;
      }
      row.faults = (row.faults || 0) + 1;
      Object.assign(row, { status: 'queued', reason: 'retry_scheduled',
        retry_at: now() + Math.min(BACKOFF_S * 2 ** (row.faults - 1), MAX_BACKOFF_S) });
    });
  }

  pick(s) { // fair across sessions: the session served least so far first, then the oldest item
    const served = (session) => s.work.filter((w) => w.session_id === session && w.status === 'finished').length;
    const t = now();
    const runnable = s.work.filter((w) => w.desired === 'run' && (w.status === 'queued' || w.status === 'running')
      && !(w.retry_at > t));
    runnable.sort((a, b) => served(a.session_id) - served(b.session_id) || a.created - b.created);
    return runnable[0];
  }

  claim(item) {
    return this.store.tx((s) => {
      const row = find(s.work, 'work_id', item.work_id);
      if (row.cv !== item.cv || row.desired !== 'run') throw new Stale();
      const lease = find(s.leases, 'work_id', item.work_id);
      const generation = (lease ? lease.generation : 0) + (lease && lease.pid === this.pid ? 0 : 1);
      s.leases = s.leases.filter((l) => l.work_id !== item.work_id);
      s.leases.push({ work_id: item.work_id, host_id: this.host, pid: this.pid, create_time: this.created,
        generation, released: false });
      Object.assign(row, { status: 'running', reason: null });
      return { ...row };
    });
  }

  current(s, item) {
    const row = find(s.work, 'work_id', item.work_id);
    if (row.desired !== 'run' || row.cv !== item.cv) throw new Stale();
    return row;
  }

  async step(item) {
    const workId = item.work_id;
    const turn = this.openTurn(item);
    const pending = this.store.read().tool_calls.filter(
      (c) => c.work_id === workId && (c.status === 'never_started' || c.status === 'dispatched'));
    if (pending.length) {
      for (const call of pending) {
        this.current(this.store.read(), item);
        await this.finishCall(item, call);
      }
      return;
    }
    const requestId = this.store.tx((s) => {
      const id = `${workId}-r${s.receipts.filter((r) => r.work_id === workId).length + 1}`;
      s.receipts.push({ request_id: id, work_id: workId, attempt: 1, prompt: null, completion: null,
        usage: 'unknown', at: now() });
      return id;
    });
    await failpoint('provider.request.before', workId);
    let reply;
    try {
      reply = await this.callProvider(this.store.read(), item, requestId);
    } catch (err) {
      if (err instanceof Cut) this.keepCut(item, requestId, err);
      throw err;
    }
    await failpoint('usage.persist.before', workId);
    if (reply.usage !== null) { // a reply without usage leaves the receipt unknown, never zero
      this.store.tx((s) => Object.assign(find(s.receipts, 'request_id', requestId),
        { prompt: reply.usage[0], completion: reply.usage[1], usage: 'known' }));
    }
    await failpoint('usage.persist.after', workId);
    const ids = reply.tool_calls.map((c) => c.id);
    if (new Set(ids).size !== ids.length) { // which result belongs to which call would be a guess
      this.store.tx((s) => {
        Object.assign(find(s.work, 'work_id', workId), { status: 'waiting', reason: 'retry_exhausted' });
        for (const l of s.leases) if (l.work_id === workId) l.released = true;
      });
      return;
    }
    const assistant = { role: 'assistant', content: reply.text || null, request_id: requestId };
    if (reply.tool_calls.length) assistant.tool_calls = reply.tool_calls;
    const tools = this.tools();
    this.store.tx((s) => {
      const row = this.current(s, item);
      addMessage(s, row, assistant);
      Object.assign(row, { progress: row.progress + 1, faults: 0, retry_at: null });
      for (const call of reply.tool_calls) {
        const name = call.function.name;
        s.tool_calls.push({ call_id: `${requestId}~${call.id}`, work_id: workId, turn_id: turn, tool: name,
          effect: (tools[name] && tools[name].effect_class) || 'unknown', status: 'never_started', pid: null,
          create_time: null, args: call.function.arguments, repair_key: null, at: now() });
      }
      if (!reply.tool_calls.length) {
        Object.assign(row, { desired: 'done', status: 'finished', reason: null });
        find(s.turns, 'turn_id', turn).status = 'completed';
        for (const l of s.leases) if (l.work_id === workId) l.released = true;
      }
    });
    if (!reply.tool_calls.length) await failpoint('completion.commit.before_projection', workId);
  }

  keepCut(item, requestId, cut) { // what arrived before the stream broke: a lower bound, marked interrupted
    if (cut.usage !== null) {
      this.store.tx((s) => Object.assign(find(s.receipts, 'request_id', requestId),
        { prompt: cut.usage[0], completion: cut.usage[1], usage: 'partial' }));
    }
    if (cut.text) {
      this.store.tx((s) => addMessage(s, this.current(s, item),
        { role: 'assistant', content: `${cut.text} [interrupted]` }));
    }
  }

  tools() { // registered as the kit gave them; a tool without a trusted class is unknown (EFF-07)
    const out = {};
    for (const t of this.config().tools) out[t.name] = { ...t, effect_class: t.effect_class || 'unknown' };
    return out;
  }

  openTurn(item) { // the active turn this process opened under the current control version, or a new one
    const workId = item.work_id;
    const key = `${workId}:${item.cv}:${item.progress}`;
    const active = this.store.read().turns.find((t) => t.work_id === workId && t.status === 'active');
    if (active && (active.ckey === key || (this.mine.has(active.turn_id) && active.ckey.split(':')[1] === String(item.cv)))) {
      this.mine.add(active.turn_id); // same continuation: a new attempt of the same turn
      return active.turn_id;
    }
    const turnId = this.store.tx((s) => {
      const known = find(s.turns, 'ckey', key);
      if (known) return known.turn_id;
      const open = s.turns.find((t) => t.work_id === workId && t.status === 'active');
      if (open) open.status = 'interrupted'; // opened by a dead owner or under an older control version
      const id = `${workId}.t${s.turns.filter((t) => t.work_id === workId).length + 1}`;
      s.turns.push({ turn_id: id, work_id: workId, ckey: key, predecessor: open ? open.turn_id : null,
        status: 'active', at: now() });
      return id;
    });
    this.mine.add(turnId);
    return turnId;
  }

  async finishCall(item, call) {
    const out = path.join(this.dir, 'tools', `${call.call_id}.out`);
    if (call.status === 'dispatched') {
      if (alive(call.pid, call.create_time)) { // reattach: wait for it, never run it again
        while (alive(call.pid, call.create_time)) {
          this.exitIfStopping(); // the child lives on; the next worker reattaches to it
          await sleep(POLL_MS);
        }
        await this.commit(item, call, readResult(out));
        return;
      }
      const done = readResult(out);
      if (done !== null) {
        await this.commit(item, call, done);
        return;
      }
      if (call.effect === 'unknown') { // it may have written: record the outcome as unknown, never rerun
        await this.commit(item, call, null, `repair:${call.call_id}`);
        await failpoint('recovery.repair.after', item.work_id);
        return;
      }
    }
    await this.dispatch(item, call, out);
  }

  async dispatch(item, call, out) {
    const tool = this.tools()[call.tool];
    if (tool === undefined) {
      await this.commit(item, call, `error: unknown tool ${JSON.stringify(call.tool)}`);
      return;
    }
    const unknownPending = this.store.read().tool_calls.some(
      (c) => c.work_id === item.work_id && c.status === 'outcome_unknown' && c.effect === 'unknown');
    if (!SAFE.has(call.effect) && unknownPending) {
      await this.commit(item, call, 'not executed: an earlier write\'s outcome is unknown; only read-only tools run '
        + 'until it is reconciled or approved', null, true);
      return;
    }
    this.exitIfStopping(); // a graceful stop starts no new tool
    await failpoint('tool.dispatch.before', item.work_id);
    fs.mkdirSync(path.dirname(out), { recursive: true });
    const fd = fs.openSync(out, 'w');
    const child = spawn(tool.argv[0], [...tool.argv.slice(1), call.args],
      { stdio: ['ignore', fd, 'ignore'], detached: true });
    fs.closeSync(fd);
    const exited = new Promise((resolve) => child.on('exit', resolve).on('error', resolve));
    const created = createTime(child.pid);
    this.store.tx((s) => Object.assign(find(s.tool_calls, 'call_id', call.call_id),
      { status: 'dispatched', pid: child.pid || null, create_time: child.pid ? created : null }));
    await failpoint('tool.dispatch.after', item.work_id);
    await Promise.race([exited, this.stopped]); // stopping: the child lives on and is reattached to
    this.exitIfStopping();
    await this.commit(item, call, readResult(out));
  }

  async commit(item, call, result, repair = null, refused = false) {
    await failpoint('tool.result.commit.before', item.work_id);
    this.store.tx((s) => {
      const row = find(s.work, 'work_id', item.work_id);
      addMessage(s, row, { role: 'tool', call_key: call.call_id, content: result === null ? UNKNOWN_RESULT : result });
      row.progress += 1;
      const status = refused ? 'refused' : result === null ? 'outcome_unknown' : 'result_committed';
      Object.assign(find(s.tool_calls, 'call_id', call.call_id), { status, repair_key: repair });
    });
    await failpoint('tool.result.commit.after', item.work_id);
  }

  callProvider(s, item, requestId) {
    const cfg = this.config();
    const url = new URL(`${cfg.provider_base_url.replace(/\/$/, '')}/chat/completions`);
    const messages = conversation(s, this.current(s, item).session_id);
    const body = JSON.stringify({ model: cfg.model || 'node-mini', messages, stream: true,
      stream_options: { include_usage: true } });
    const headers = { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(body),
      'X-Request-Id': requestId };
    if (cfg.api_key) headers.Authorization = `Bearer ${cfg.api_key}`;
    return new Promise((resolve, reject) => {
      const req = http.request(url, { method: 'POST', headers, timeout: 600000 });
      const answered = new Promise((ok) => req.on('response', ok));
      req.on('error', reject);
      req.on('timeout', () => req.destroy(new Error('provider timed out')));
      req.end(body, async () => {
        await failpoint('provider.request.after', item.work_id);
        readStream(await answered).then(resolve, reject);
      });
    });
  }
}

// What the model is sent: the session's whole conversation in commit order, so an input acknowledged while
// earlier work of its session is under way reaches the model with the next request (steer, CTL-05). Each
// assistant message asking for tools is followed at once by the results of exactly those calls.
function conversation(s, sessionId) {
  const own = s.messages.filter((m) => m.session_id === sessionId).sort((a, b) => a.seq - b.seq);
  const results = new Map(own.filter((m) => m.role === 'tool').map((m) => [m.call_key, m.content]));
  const out = [];
  for (const m of own) {
    if (m.role === 'user') out.push({ role: 'user', content: m.content });
    if (m.role !== 'assistant') continue;
    out.push(m.tool_calls ? { role: 'assistant', content: m.content, tool_calls: m.tool_calls }
      : { role: 'assistant', content: m.content });
    for (const call of m.tool_calls || []) {
      const content = results.get(`${m.request_id}~${call.id}`) ?? '[no result: this call did not run]';
      out.push({ role: 'tool', tool_call_id: call.id, content });
    }
  }
  return out;
}

function readStream(resp) {
  return new Promise((resolve, reject) => {
    if (resp.statusCode !== 200) {
      resp.resume();
      reject(Object.assign(new Error(`provider answered ${resp.statusCode}`), { status: resp.statusCode }));
      return;
    }
    let buffer = '';
    let text = '';
    let usage = null;
    let id = null;
    let done = false;
    const calls = new Map();
    const line = (raw) => {
      const l = raw.trim();
      if (l === 'data: [DONE]') done = true;
      if (!l.startsWith('data:') || done) return;
      let chunk;
      try {
        chunk = JSON.parse(l.slice(5));
      } catch {
        return; // a torn line of a cut stream: the missing [DONE] says it is incomplete
      }
      id = id || chunk.id || null;
      if (chunk.usage) { // cumulative snapshots: keep the highest, never sum them
        const got = [chunk.usage.prompt_tokens, chunk.usage.completion_tokens];
        usage = usage === null ? got : [Math.max(usage[0], got[0]), Math.max(usage[1], got[1])];
      }
      for (const choice of chunk.choices || []) {
        const delta = choice.delta || {};
        text += delta.content || '';
        for (const tc of delta.tool_calls || []) {
          if (!calls.has(tc.index)) calls.set(tc.index, { id: '', type: 'function', function: { name: '', arguments: '' } });
          const slot = calls.get(tc.index);
          slot.id = tc.id || slot.id;
          slot.function.name += (tc.function && tc.function.name) || '';
          slot.function.arguments += (tc.function && tc.function.arguments) || '';
        }
      }
    };
    resp.setEncoding('utf8');
    resp.on('data', (chunk) => {
      buffer += chunk;
      const lines = buffer.split('\n');
      buffer = lines.pop();
      lines.forEach(line);
    });
    const finish = () => {
      if (buffer) line(buffer);
      buffer = '';
      if (!done) {
        reject(new Cut(text, usage));
        return;
      }
      const toolCalls = [...calls.keys()].sort((a, b) => a - b).map((k) => calls.get(k));
      resolve({ text, tool_calls: toolCalls, usage, id });
    };
    resp.on('end', finish);
    resp.on('aborted', finish);
    resp.on('error', finish);
  });
}

function readResult(file) {
  try {
    return fs.readFileSync(file, 'utf8').trim() || null;
  } catch {
    return null;
  }
}

const worker = new Worker(process.argv[2]);
process.on('SIGTERM', () => worker.stop());
worker.run();
