/**
 * What a started node leaves for scripts and supervisors: its pid in a file (by default in the data
 * directory, which only this gateway may use, so scripts signal this gateway and no other one on the
 * machine), and, under `npm start`, a stop when npm goes away.
 */
import { readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';

export const PID_FILE_NAME = 'tollgate.pid';
/** How often a gateway started by npm checks that npm is still there. */
const PARENT_CHECK_MS = 1000;

/** Writes this process's pid; returns the file's absolute path. Throws with the operator's message. */
export function writePidFile(option: string | undefined, dataDir: string): string {
  const file = resolve(option ?? join(dataDir, PID_FILE_NAME));
  try {
    writeFileSync(file, `${process.pid}\n`);
  } catch (err) {
    throw new Error(`cannot write the pid file ${file}: ${(err as Error).message}`);
  }
  return file;
}

/** Only our own: a gateway started later on the same data directory may have written its pid since. */
export function removePidFile(file: string): void {
  try {
    if (readFileSync(file, 'utf8').trim() === String(process.pid)) rmSync(file);
  } catch {
    // Already gone.
  }
}

/**
 * `npm start` runs the gateway as npm's child and relays SIGINT and SIGTERM to it, but npm dies of
 * any other signal (SIGHUP, SIGKILL) and leaves its child running, holding the ports and the data
 * directory. Under npm, the gateway stops when its parent changes.
 */
export function stopWhenNpmExits(stop: () => void): void {
  if (!process.env.npm_lifecycle_event) return;
  const parent = process.ppid;
  const timer = setInterval(() => {
    if (process.ppid === parent) return;
    clearInterval(timer);
    stop();
  }, PARENT_CHECK_MS).unref();
}
