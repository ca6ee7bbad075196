/**
 * A small filesystem of the test's own (a tmpfs mounted for it) that the gateway's writes really run out
 * of: the disk-full tests fill it, then free it. Mounting needs root (CI runs as root); where the
 * machine refuses, `mountSmallDisk` returns the reason for the test's skip instead.
 */
import { execFileSync } from 'node:child_process';
import { rmSync, statfsSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { tempDir } from './gateway.ts';

export interface SmallDisk {
  /** The mount point. */
  dir: string;
  /** Fills the disk with a file of its own until `leaveBytes` are left. */
  fill(leaveBytes: number): void;
  /** Removes that file. */
  free(): void;
  unmount(): void;
}

const mounted = new Set<string>();
// Lazily: a gateway being killed by the helpers' own exit handler may still hold files there.
process.once('exit', () => {
  for (const dir of mounted) unmount(dir);
});

function unmount(dir: string): void {
  try {
    execFileSync('umount', ['--lazy', dir], { stdio: 'ignore' });
  } catch {
    // Unmounted already.
  }
  mounted.delete(dir);
}

export function mountSmallDisk(bytes: number): SmallDisk | string {
  const dir = tempDir('tollgate-small-disk-');
  try {
    execFileSync('mount', ['-t', 'tmpfs', '-o', `size=${bytes}`, 'tmpfs', dir], { stdio: 'pipe' });
  } catch (err) {
    return `cannot mount a small tmpfs here (needs root): ${String((err as { stderr?: Buffer }).stderr ?? err).trim()}`;
  }
  mounted.add(dir);
  const filler = join(dir, 'filler');
  return {
    dir,
    fill(leaveBytes) {
      const { bavail, bsize } = statfsSync(dir);
      writeFileSync(filler, Buffer.alloc(Math.max(0, bavail * bsize - leaveBytes)));
    },
    free: () => rmSync(filler, { force: true }),
    unmount: () => unmount(dir),
  };
}
