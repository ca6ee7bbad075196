/**
 * The embedded store reached over IPC (worker processes): the store contract through the protocol,
 * with two clients on one owner as two workers; and a client whose owner went away fails its calls
 * and tells its subscribers their caches may be stale.
 */
import assert from 'node:assert/strict';
import { createServer, connect, type Server, type Socket } from 'node:net';
import { join } from 'node:path';
import { test } from 'node:test';
import { StoreClosedError } from '../../../src/store/errors.ts';
import { NoticeHub, RemoteStore, serveStore } from '../../../src/store/ipc.ts';
import { LevelStore } from '../../../src/store/level.ts';
import { tempDir } from '../../helpers/gateway.ts';
import { waitFor } from '../../helpers/support.ts';
import { storeContract } from './contract.ts';

interface Owner {
  store: LevelStore;
  server: Server;
  path: string;
  client(): Promise<RemoteStore>;
  /** Drops every client connection, as the owner's death would. */
  dropClients(): void;
  close(): Promise<void>;
}

/** A LevelDB owner serving clients on a Unix socket, as the primary process serves its workers. */
async function owner(): Promise<Owner> {
  const dir = tempDir();
  const store = new LevelStore(join(dir, 'store'));
  await store.open();
  const hub = new NoticeHub(store.localNotices);
  const path = join(dir, 'store.sock');
  const sockets = new Set<Socket>();
  const server = createServer((socket) => {
    sockets.add(socket);
    serveStore(store, hub, socket);
  });
  await new Promise<void>((r) => server.listen(path, r));
  return {
    store,
    server,
    path,
    client: () =>
      new Promise((resolve, reject) => {
        const socket = connect(path, () => resolve(new RemoteStore(socket)));
        socket.once('error', reject);
      }),
    dropClients: () => sockets.forEach((s) => s.destroy()),
    async close() {
      await new Promise((r) => server.close(r));
      await store.close();
    },
  };
}

const owners: Owner[] = [];
storeContract({
  name: 'LevelDB over IPC',
  shared: true,
  location: async () => {
    const o = await owner();
    owners.push(o);
    return { open: () => o.client() };
  },
  teardown: async () => {
    for (const o of owners) await o.close();
  },
});

test('when the owner goes away, calls fail with StoreClosedError and subscribers get null', async (t) => {
  const o = await owner();
  t.after(() => o.close());
  const client = await o.client();
  await client.put('k', 'v');
  const got: (string | null)[] = [];
  client.namespace('core').notices.subscribe('consumers', (m) => got.push(m));
  o.dropClients();
  await waitFor(() => got.length > 0, 'the loss to be noticed');
  assert.deepEqual(got, [null]);
  await assert.rejects(client.get('k'), StoreClosedError);
  assert.equal(await client.reachable(), false);
});
