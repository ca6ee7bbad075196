/**
 * The data directory holds secrets (client secrets, provision keys, token digests, the TLS key): only the
 * gateway's user can read it. What the gateway creates is 0700 (directories) and 0600 (files), LevelDB's
 * own files included, and a data directory left readable by an older version is tightened at start.
 */
import assert from 'node:assert/strict';
import { chmodSync, readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { request, startGateway, tempDir } from '../helpers/gateway.ts';

/** Every directory and file under `root` (itself included) whose mode lets group or others in. */
function readableByOthers(root: string): string[] {
  const found: string[] = [];
  const visit = (path: string) => {
    const stat = statSync(path);
    if ((stat.mode & 0o077) !== 0) found.push(`${path} ${(stat.mode & 0o777).toString(8)}`);
    if (stat.isDirectory()) for (const name of readdirSync(path)) visit(join(path, name));
  };
  visit(root);
  return found;
}

function loosen(root: string): void {
  chmodSync(root, 0o755);
  for (const entry of readdirSync(root, { withFileTypes: true, recursive: true })) {
    chmodSync(join(entry.parentPath, entry.name), entry.isDirectory() ? 0o755 : 0o644);
  }
}

/** A gateway with a TLS listener (so the certificate is generated) that writes a runtime consumer to the store. */
async function runOnce(dataDir: string): Promise<void> {
  const gw = await startGateway({}, { dataDir });
  try {
    const created = await request(`${gw.admin}/consumers`, { method: 'POST', body: { username: `u-${Date.now()}` } });
    assert.equal(created.status, 201, created.text);
  } finally {
    await gw.stop();
  }
}

test('a new data directory, the store and the generated TLS files are private to the gateway user', async () => {
  const dataDir = join(tempDir(), 'data');
  await runOnce(dataDir);
  assert.ok(statSync(join(dataDir, 'tls', 'gateway.key')).isFile());
  assert.ok(readdirSync(join(dataDir, 'store')).some((name) => name.endsWith('.log')), 'LevelDB wrote its files');
  assert.deepEqual(readableByOthers(dataDir), []);
});

test('a data directory readable by others (0755 directories, 0644 files) is tightened at start', async () => {
  const dataDir = join(tempDir(), 'data');
  await runOnce(dataDir);
  loosen(dataDir);
  assert.notDeepEqual(readableByOthers(dataDir), []);
  await runOnce(dataDir);
  assert.deepEqual(readableByOthers(dataDir), []);
});
