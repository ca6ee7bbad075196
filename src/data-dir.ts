/**
 * The data directory holds secrets (runtime client secrets, provision keys, token digests, the TLS
 * key): only the gateway's user may read it. Directories are 0700 and files 0600, both those the
 * gateway creates and those an older version left readable by others.
 */
import { chmod, lstat, mkdir, readdir } from 'node:fs/promises';
import { join } from 'node:path';

export const PRIVATE_DIR_MODE = 0o700;
export const PRIVATE_FILE_MODE = 0o600;
/** Clears the group and other bits of everything this process creates from now on. */
const PRIVATE_UMASK = 0o077;

/**
 * Makes `dir` private and returns the paths that could not be tightened (not ours). The umask is the only
 * way to reach LevelDB's own files: it creates every table, log and manifest with mode 0644 & ~umask.
 */
export async function preparePrivateDir(dir: string): Promise<string[]> {
  process.umask(PRIVATE_UMASK);
  await mkdir(dir, { recursive: true, mode: PRIVATE_DIR_MODE });
  const refused: string[] = [];
  await tighten(dir, refused);
  return refused;
}

/** chmod of the tree, symlinks left alone (chmod would follow one out of the directory). */
async function tighten(path: string, refused: string[]): Promise<void> {
  const stat = await lstat(path);
  if (stat.isSymbolicLink()) return;
  const mode = stat.isDirectory() ? PRIVATE_DIR_MODE : PRIVATE_FILE_MODE;
  if ((stat.mode & 0o777) !== mode) {
    try {
      await chmod(path, mode);
    } catch {
      refused.push(path);
    }
  }
  if (stat.isDirectory()) for (const name of await readdir(path)) await tighten(join(path, name), refused);
}
