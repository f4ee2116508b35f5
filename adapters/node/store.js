'use strict';
// The runtime's durable state: one JSON document, state.json in the data dir, shared by the adapter
// (user controls) and the worker (execution). Every change is a transaction: take the lock file,
// read, change, write a temporary file, fsync it, rename it over state.json, fsync the directory.
// A SIGKILL at any moment leaves the last committed document; a lock left by a dead process is broken.

const fs = require('node:fs');
const path = require('node:path');
const { createTime, alive, sleepSync } = require('./proc');

const SECTIONS = ['work', 'inputs', 'messages', 'turns', 'tool_calls', 'receipts', 'leases'];

class Store {
  constructor(dataDir) {
    this.dir = dataDir;
    this.file = path.join(dataDir, 'state.json');
    this.lockFile = path.join(dataDir, 'state.lock');
    this.me = `${process.pid} ${createTime(process.pid)}`;
    fs.mkdirSync(dataDir, { recursive: true });
  }

  read() {
    let state = {};
    try {
      state = JSON.parse(fs.readFileSync(this.file, 'utf8'));
    } catch (err) {
      if (err.code !== 'ENOENT') throw err;
    }
    for (const section of SECTIONS) state[section] = state[section] || [];
    return state;
  }

  // fn(state) changes state in place; a throw aborts the transaction (nothing written).
  tx(fn) {
    this.lock();
    try {
      const state = this.read();
      const out = fn(state);
      this.write(state);
      return out;
    } finally {
      fs.rmSync(this.lockFile, { force: true });
    }
  }

  write(state) {
    const tmp = `${this.file}.tmp-${process.pid}`;
    const fd = fs.openSync(tmp, 'w');
    try {
      fs.writeSync(fd, JSON.stringify(state));
      fs.fsyncSync(fd);
    } finally {
      fs.closeSync(fd);
    }
    fs.renameSync(tmp, this.file);
    const dirFd = fs.openSync(this.dir, 'r');
    try {
      fs.fsyncSync(dirFd);
    } finally {
      fs.closeSync(dirFd);
    }
  }

  lock() {
    for (let tries = 0; ; tries += 1) {
      try {
        fs.writeFileSync(this.lockFile, this.me, { flag: 'wx' });
        return;
      } catch (err) {
        if (err.code !== 'EEXIST') throw err;
      }
      this.breakIfStale();
      sleepSync(tries < 50 ? 1 : 5);
    }
  }

  breakIfStale() {
    let holder;
    let age;
    try {
      holder = fs.readFileSync(this.lockFile, 'utf8');
      age = Date.now() - fs.statSync(this.lockFile).mtimeMs;
    } catch {
      return; // released meanwhile
    }
    const [pid, created] = holder.split(' ').map(Number);
    const dead = holder ? !alive(pid, created) : age > 2000; // empty: its writer died between open and write
    if (!dead) return;
    const aside = `${this.lockFile}.stale-${process.pid}`;
    try {
      fs.renameSync(this.lockFile, aside); // only one breaker wins the rename
      fs.rmSync(aside, { force: true });
      process.stderr.write(`node-mini[${process.pid}] broke a lock left by dead process ${holder || '(empty)'}\n`);
    } catch {
      // another process broke it first
    }
  }
}

// A message of a session's conversation (user inputs, answers, tool results), in commit order.
function addMessage(state, item, message) {
  state.next_seq = (state.next_seq || 0) + 1;
  state.messages.push({ ...message, seq: state.next_seq, session_id: item.session_id, work_id: item.work_id });
}

function now() {
  return Date.now() / 1000;
}

module.exports = { Store, addMessage, now };
