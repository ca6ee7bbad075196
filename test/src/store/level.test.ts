/** The LevelDB store adapter: the store contract, and what is LevelDB's own (one process per directory). */
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { test } from 'node:test';
import { LevelStore } from '../../../src/store/level.ts';
import { tempDir } from '../../helpers/gateway.ts';
import { storeContract } from './contract.ts';

function levelAt(dir: string) {
  return {
    async open() {
      const store = new LevelStore(dir);
      await store.open();
      return store;
    },
  };
}

storeContract({ name: 'LevelDB', shared: false, location: async () => levelAt(join(tempDir(), 'store')) });

test('a second process cannot open a data directory in use (LevelDB lock)', async () => {
  const dir = join(tempDir(), 'store');
  const first = await levelAt(dir).open();
  try {
    await assert.rejects(new LevelStore(dir).open());
  } finally {
    await first.close();
  }
});

test('the expiry index is deleted with the entries it points to', async () => {
  const store = await levelAt(join(tempDir(), 'store')).open();
  try {
    await store.namespace('t').put('k', 'v', { ttlMs: 10 });
    await new Promise((r) => setTimeout(r, 30));
    assert.equal(await store.sweepExpired(), 1);
    // Neither the entry nor its index entry is left in the raw database.
    assert.deepEqual(await collect(store.scan({})), []);
  } finally {
    await store.close();
  }
});

async function collect(iterable: AsyncIterable<[string, string]>): Promise<string[]> {
  const out: string[] = [];
  for await (const [key] of iterable) out.push(key);
  return out;
}
