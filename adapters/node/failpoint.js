'use strict';
// The failpoint client in JavaScript: the same wire as the kit's failpoint_client.py (docs/failpoints.md).
// RECOVERYKIT_FAILPOINTS ("point=[N*]action[->...];...") is parsed once; an unarmed point costs one
// Map lookup. A fired point reports {"v":1,"type":"hit",...} on the Unix socket RECOVERYKIT_FAILPOINT_SOCKET;
// `pause` waits for the broker's one-line answer ({"resume":"continue"|"crash"}), `crash` SIGKILLs this
// process, `sleep(ms)` sleeps. Hits are counted per process.

const net = require('node:net');
const { sleep } = require('./proc');

const ACTIONS = new Set(['off', 'pause', 'crash', 'sleep']);

function parse(text) {
  const armed = new Map();
  for (const entry of text.split(';')) {
    if (!entry.trim()) continue;
    const eq = entry.indexOf('=');
    const point = entry.slice(0, eq).trim();
    if (eq < 0 || armed.has(point) || !point.split('.').every((w) => /^[a-z0-9_]+$/.test(w))) {
      throw new Error(`bad failpoint entry ${JSON.stringify(entry)}`);
    }
    const terms = [];
    for (const raw of entry.slice(eq + 1).split('->')) {
      const m = /^(?:(\d+)\*)?(off|pause|crash|sleep\((\d+)\))$/.exec(raw.trim());
      if (!m || (m[1] !== undefined && Number(m[1]) < 1)) throw new Error(`bad failpoint term ${JSON.stringify(raw)}`);
      if (terms.length && terms[terms.length - 1].count === null) throw new Error(`term ${raw} follows one without a count`);
      terms.push({ action: m[3] === undefined ? m[2] : 'sleep', count: m[1] === undefined ? null : Number(m[1]),
        millis: m[3] === undefined ? null : Number(m[3]) });
    }
    armed.set(point, { hits: 0, terms });
  }
  return armed;
}

const ARMED = parse(process.env.RECOVERYKIT_FAILPOINTS || '');
const SOCKET = process.env.RECOVERYKIT_FAILPOINT_SOCKET || '';

function report(hit, wait) {
  const line = `${JSON.stringify(hit)}\n`;
  if (!SOCKET) {
    process.stderr.write(`failpoint hit with no RECOVERYKIT_FAILPOINT_SOCKET: ${line}`);
    return wait ? new Promise(() => setInterval(() => {}, 3600e3)) : Promise.resolve('continue');
  }
  return new Promise((resolve) => {
    let answer = '';
    const conn = net.createConnection({ path: SOCKET }, () => {
      if (wait) conn.write(line);
      else conn.end(line, () => resolve('continue'));
    });
    conn.on('data', (chunk) => {
      answer += chunk;
      if (answer.endsWith('\n')) {
        conn.destroy();
        try {
          resolve(JSON.parse(answer).resume || 'continue');
        } catch {
          resolve('continue');
        }
      }
    });
    conn.on('end', () => resolve('continue')); // the broker went away: never hang forever
    conn.on('error', (err) => {
      process.stderr.write(`failpoint ${hit.point}: broker at ${SOCKET} unreachable (${err.message}); continuing\n`);
      resolve('continue');
    });
  });
}

async function failpoint(point, workId = null) {
  const armed = ARMED.get(point);
  if (armed === undefined) return;
  armed.hits += 1;
  const term = armed.terms.find((t) => t.count === null || t.count > 0);
  if (term === undefined) return;
  if (term.count !== null) term.count -= 1;
  if (term.action === 'off') return;
  const hit = { v: 1, type: 'hit', point, pid: process.pid, hit: armed.hits, work_id: workId, action: term.action,
    time: Date.now() / 1000 };
  let action = term.action;
  if (action === 'pause') {
    if ((await report(hit, true)) === 'crash') action = 'crash';
  } else {
    await report(hit, false);
  }
  if (action === 'sleep') await sleep(term.millis);
  if (action === 'crash') {
    process.kill(process.pid, 'SIGKILL');
    await sleep(60000);
  }
}

module.exports = { failpoint, parse };
