/**
 * The entity directory on a real LevelDB store, with two directories on the same store standing for two
 * processes (the store's notices reach both, as they reach every process sharing a store): a change made
 * by one is seen by the other, a unique value is claimed once across them, deleting a parent deletes its
 * children of every type, declared entities win lookups and are never persisted, expired ones vanish,
 * a store read that a local change overtook never brings back what was deleted, and an update or deletion
 * made from a version the other process replaced never leaves a unique value claimed by the wrong record,
 * nor does a child created by one process just before another deletes its parent.
 */
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { Consumers } from '../../../src/consumers.ts';
import { LevelStore } from '../../../src/store/level.ts';
import { ConcurrentChangeError, PrimaryKeyViolationError, UniqueViolationError } from '../../../src/toolkit/admin-errors.ts';
import { EntityDirectory } from '../../../src/toolkit/entity-directory.ts';
import type { Entity, EntityDefinition } from '../../../src/pdk/types.ts';
import { tempDir } from '../../helpers/gateway.ts';
import { waitFor } from '../../helpers/support.ts';

const keyEntity: EntityDefinition = {
  name: 'keyauth_credentials',
  schema: { type: 'record', fields: { key: { type: 'string' }, tags: { type: 'set', elements: { type: 'string' } } } },
  parent: { entity: 'consumers', field: 'consumer', required: true },
  endpointKey: 'key',
  digested: ['key'],
  ttl: true,
};

const groupEntity: EntityDefinition = {
  name: 'acls',
  schema: { type: 'record', fields: { group: { type: 'string', required: true } } },
  parent: { entity: 'consumers', field: 'consumer', required: true },
  uniqueInParent: 'group',
};

let store: LevelStore;
before(async () => {
  store = new LevelStore(join(tempDir(), 'store'));
  await store.open();
});
after(() => store.close());

/** One "process": its consumers and their key and group directories, on the shared store. */
async function processOn(namespace: string) {
  const consumers = new Consumers(store.namespace(`${namespace}.core`));
  const keys = new EntityDirectory<Entity>(store.namespace(`${namespace}.plugin.key-auth`), keyEntity, { parent: consumers });
  const groups = new EntityDirectory<Entity>(store.namespace(`${namespace}.plugin.acl`), groupEntity, { parent: consumers });
  await Promise.all([consumers.load(), keys.load(), groups.load()]);
  return { consumers, keys, groups };
}

let n = 0;
const fresh = () => `t${n++}`;

describe('two processes on one store', () => {
  it('a consumer created by one is found by the other (by id and username), and its deletion too', async () => {
    const ns = fresh();
    const [a, b] = [await processOn(ns), await processOn(ns)];
    const created = await a.consumers.save({ id: crypto.randomUUID(), username: 'alice' } as never);
    await waitFor(() => b.consumers.byUsername('alice')?.id === created.id, 'the other process to see the consumer');
    assert.equal(b.consumers.byId(created.id)?.username, 'alice');
    await a.consumers.remove(created);
    await waitFor(() => b.consumers.byUsername('alice') === undefined, 'the other process to see the deletion');
  });

  it('a unique value is claimed once: the second process to take it gets a unique violation', async () => {
    const ns = fresh();
    const [a, b] = [await processOn(ns), await processOn(ns)];
    // Both create before either has heard of the other's consumer: only the store can tell them apart.
    const results = await Promise.allSettled([
      a.consumers.save({ id: crypto.randomUUID(), username: 'bob' } as never),
      b.consumers.save({ id: crypto.randomUUID(), username: 'bob' } as never),
    ]);
    assert.deepEqual(results.map((r) => r.status).sort(), ['fulfilled', 'rejected']);
    const refused = results.find((r) => r.status === 'rejected') as PromiseRejectedResult;
    assert.ok(refused.reason instanceof UniqueViolationError, String(refused.reason));
    assert.deepEqual(refused.reason.body(), { code: 5, name: 'unique constraint violation', message: `UNIQUE violation detected on '{username="bob"}'`, fields: { username: 'bob' } });
  });

  it("deleting a consumer deletes its children of every type, in every process, and frees their unique values", async () => {
    const ns = fresh();
    const [a, b] = [await processOn(ns), await processOn(ns)];
    const owner = await a.consumers.save({ id: crypto.randomUUID(), username: 'carol' } as never);
    const key = await a.keys.save({ id: crypto.randomUUID(), key: a.keys.storedValue('key', 'secret-key'), consumer: { id: owner.id } });
    await a.groups.save({ id: crypto.randomUUID(), group: 'admins', consumer: { id: owner.id } });
    await waitFor(() => b.keys.find('key', 'secret-key')?.id === key.id && b.groups.findInParent(owner.id, 'admins') !== undefined, 'the children to reach the other process');
    await b.consumers.remove(b.consumers.byId(owner.id)!);
    assert.equal(b.keys.byId(key.id), undefined);
    await waitFor(() => a.keys.find('key', 'secret-key') === undefined && a.groups.childrenOf(owner.id).length === 0, 'the cascade to reach the first process');
    // The key is free again, in the store too.
    const heir = await a.consumers.save({ id: crypto.randomUUID(), username: 'dave' } as never);
    await a.keys.save({ id: crypto.randomUUID(), key: a.keys.storedValue('key', 'secret-key'), consumer: { id: heir.id } });
  });

  it('an update made from a version the other process replaced changes nothing; the claims stay with the stored record', async () => {
    const ns = fresh();
    const [a, b] = [await processOn(ns), await processOn(ns)];
    const owner = await a.consumers.save({ id: crypto.randomUUID(), username: 'erin' } as never);
    const stored = (plain: string) => a.keys.storedValue('key', plain);
    const first = await a.keys.save({ id: crypto.randomUUID(), key: stored('first'), consumer: { id: owner.id } });
    await a.keys.save({ ...first, key: stored('second') }, first);
    // B writes from the version A replaced, as a node that has not heard of A's change yet would.
    await assert.rejects(b.keys.save({ ...first, key: stored('third') }, first), ConcurrentChangeError);
    await waitFor(() => b.keys.byId(first.id)?.key === stored('second'), 'the other process to see the update');
    // 'first' and 'third' are free, 'second' is the record's.
    await a.keys.save({ id: crypto.randomUUID(), key: stored('first'), consumer: { id: owner.id } });
    await a.keys.save({ id: crypto.randomUUID(), key: stored('third'), consumer: { id: owner.id } });
    await assert.rejects(a.keys.save({ id: crypto.randomUUID(), key: stored('second'), consumer: { id: owner.id } }), UniqueViolationError);
  });

  it('a deletion from a version the other process replaced deletes the stored record and frees its values', async () => {
    const ns = fresh();
    const [a, b] = [await processOn(ns), await processOn(ns)];
    const owner = await a.consumers.save({ id: crypto.randomUUID(), username: 'frank' } as never);
    const stored = (plain: string) => a.keys.storedValue('key', plain);
    const first = await a.keys.save({ id: crypto.randomUUID(), key: stored('old'), consumer: { id: owner.id } });
    await waitFor(() => b.keys.byId(first.id) !== undefined, 'the other process to see the key');
    const staleInB = b.keys.byId(first.id)!;
    await a.keys.save({ ...first, key: stored('new') }, first);
    await b.keys.remove(staleInB);
    await waitFor(() => a.keys.byId(first.id) === undefined, 'the deletion to reach the first process');
    await a.keys.save({ id: crypto.randomUUID(), key: stored('new'), consumer: { id: owner.id } });
    await a.keys.save({ id: crypto.randomUUID(), key: stored('old'), consumer: { id: owner.id } });
  });

  it('a child the deleting process had not heard of is deleted by the process that knows it, and its values freed', async () => {
    const ns = fresh();
    const [a, b] = [await processOn(ns), await processOn(ns)];
    const owner = await a.consumers.save({ id: crypto.randomUUID(), username: 'grace' } as never);
    await waitFor(() => b.consumers.byId(owner.id) !== undefined, 'the other process to see the consumer');
    // A's key directory hears nothing more: it stands for a process the news of B's key has not reached yet.
    a.keys.close();
    const key = await b.keys.save({ id: crypto.randomUUID(), key: b.keys.storedValue('key', 'late-key'), consumer: { id: owner.id } });
    await a.consumers.remove(owner);
    await waitFor(() => b.keys.byId(key.id) === undefined && b.consumers.byId(owner.id) === undefined, 'the other process to drop the consumer and its key');
    const heir = await b.consumers.save({ id: crypto.randomUUID(), username: 'heidi' } as never);
    await waitFor(async () => {
      try {
        await b.keys.save({ id: crypto.randomUUID(), key: b.keys.storedValue('key', 'late-key'), consumer: { id: heir.id } });
        return true;
      } catch (err) {
        if (err instanceof UniqueViolationError) return false;
        throw err;
      }
    }, 'the orphan key to be deleted from the store');
  });

  it('a group name is unique per consumer only', async () => {
    const { consumers, groups } = await processOn(fresh());
    const [x, y] = await Promise.all(['x', 'y'].map((username) => consumers.save({ id: crypto.randomUUID(), username } as never)));
    await groups.save({ id: crypto.randomUUID(), group: 'admins', consumer: { id: x.id } });
    await groups.save({ id: crypto.randomUUID(), group: 'admins', consumer: { id: y.id } });
    await assert.rejects(groups.save({ id: crypto.randomUUID(), group: 'admins', consumer: { id: x.id } }), UniqueViolationError);
    assert.deepEqual(groups.childrenOf(x.id).map((g) => g.group), ['admins']);
  });
});

describe('one process', () => {
  it('keys are stored as digests, never as given', async () => {
    const ns = fresh();
    const { consumers, keys } = await processOn(ns);
    const owner = await consumers.save({ id: crypto.randomUUID(), username: 'erin' } as never);
    await keys.save({ id: crypto.randomUUID(), key: keys.storedValue('key', 'plain-api-key'), consumer: { id: owner.id } });
    for await (const [k, v] of store.scan({ prefix: `${ns}.plugin.key-auth` })) assert.ok(!`${k}${v}`.includes('plain-api-key'), `${k} = ${v}`);
    assert.ok(keys.find('key', 'plain-api-key'));
  });

  it('an expiring entity reads as absent once its ttl has run out', async () => {
    const { consumers, keys } = await processOn(fresh());
    const owner = await consumers.save({ id: crypto.randomUUID(), username: 'frank' } as never);
    await keys.save({ id: crypto.randomUUID(), key: keys.storedValue('key', 'short-lived'), consumer: { id: owner.id } }, undefined, 1);
    assert.ok(keys.find('key', 'short-lived'));
    await waitFor(() => keys.find('key', 'short-lived') === undefined, 'the key to expire', 3000);
    assert.equal(keys.list().length, 0);
  });

  it('declared entities win lookups, are read-only to writes of the same id, and are never stored', async () => {
    const ns = fresh();
    const { consumers } = await processOn(ns);
    const runtime = await consumers.save({ id: crypto.randomUUID(), username: 'grace', custom_id: 'runtime' } as never);
    const declared = { id: crypto.randomUUID(), username: 'grace', custom_id: 'declared', tags: null, created_at: 0 };
    consumers.setDeclared([declared]);
    assert.equal(consumers.byUsername('grace')?.custom_id, 'declared');
    assert.equal(consumers.byId(runtime.id)?.custom_id, 'runtime', 'the runtime one is still there by id');
    assert.ok(consumers.isDeclared(consumers.byId(declared.id)!));
    await assert.rejects(consumers.save({ id: declared.id, username: 'other' } as never), PrimaryKeyViolationError);
    await assert.rejects(consumers.save({ id: crypto.randomUUID(), username: 'x', custom_id: 'declared' } as never), UniqueViolationError);
    for await (const [, v] of store.scan({ prefix: `${ns}.core` })) assert.ok(!v.includes('"declared"'), v);
    consumers.setDeclared([]);
    assert.equal(consumers.byUsername('grace')?.custom_id, 'runtime');
  });

  it('a notice read that a local deletion overtook does not bring the entity back', async () => {
    // The real store, whose reads this test lets finish one at a time: the save's own notice is still
    // being read when the deletion lands, as happens with a remote database.
    const real = store.namespace(`${fresh()}.core`);
    const held: (() => void)[] = [];
    let holding = false;
    const gated = new Proxy(real, {
      get: (target, name) => {
        if (name !== 'get') return Reflect.get(target, name);
        return async (key: string) => {
          const value = await target.get(key);
          if (holding) await new Promise<void>((release) => held.push(release));
          return value;
        };
      },
    });
    const consumers = new Consumers(gated);
    await consumers.load();
    holding = true;
    const id = crypto.randomUUID();
    // The save answers once its notice is applied: the deletion comes from a concurrent request.
    const saving = consumers.save({ id, username: 'heidi' } as never);
    await waitFor(() => held.length === 1, "the save's notice read");
    const removing = consumers.remove(consumers.byId(id)!);
    held.shift()!();
    await waitFor(() => held.length === 1, "the deletion's notice read");
    assert.equal(consumers.byId(id), undefined, 'the stale read brought it back');
    holding = false;
    held.shift()!();
    await Promise.all([saving, removing]);
  });
});
