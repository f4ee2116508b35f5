'use strict';
// Process identity on Linux without dependencies: a pid plus its start time, as psutil computes
// create_time (boot time + start ticks / CLK_TCK), so the kit and the runtime name the same process
// and a reused pid is never taken for the old one.

const fs = require('node:fs');
const { execFileSync } = require('node:child_process');

function clockTicks() {
  try {
    return Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim()) || 100;
  } catch {
    return 100;
  }
}

const TICKS = clockTicks();
const BOOT = Number(/^btime (\d+)$/m.exec(fs.readFileSync('/proc/stat', 'utf8'))[1]);

function statFields(pid) {
  const text = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
  return text.slice(text.lastIndexOf(')') + 2).split(' '); // [0] is the state, [19] the start ticks
}

function createTime(pid) {
  try {
    return Number(statFields(pid)[19]) / TICKS + BOOT;
  } catch {
    return null;
  }
}

function alive(pid, created) {
  if (!pid || created === null || created === undefined) return false;
  try {
    const fields = statFields(pid);
    return fields[0] !== 'Z' && Math.abs(Number(fields[19]) / TICKS + BOOT - created) < 0.05;
  } catch {
    return false;
  }
}

const SLEEPER = new Int32Array(new SharedArrayBuffer(4));

function sleepSync(ms) {
  Atomics.wait(SLEEPER, 0, 0, ms);
}

function sleep(ms) {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

module.exports = { createTime, alive, sleepSync, sleep };
