/**
 * What a started node leaves for scripts and supervisors: its pid in a file (by default in the data
 * directory, which only this gateway may use, so scripts signal this gateway and no other one on the
 * machine).
 */
import { readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';

export const PID_FILE_NAME = 'tollgate.pid';

/** Where a node's pid goes: `--pid-file`, else tollgate.pid in the data directory. */
export function pidFilePath(option: string | undefined, dataDir: string): string {
  return resolve(option ?? join(dataDir, PID_FILE_NAME));
}

/** Writes this process's pid; returns the file's absolute path. Throws with the operator's message. */
export function writePidFile(option: string | undefined, dataDir: string): string {
  const file = pidFilePath(option, dataDir);
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
