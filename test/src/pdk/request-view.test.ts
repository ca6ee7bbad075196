/**
 * What the request view and the outcome tell a plugin beyond the routed request: `rawPath`, the path as
 * the client sent it (its escapes kept, where `path` is normalized), and `outcome.complete`,
 * false when the upstream cut its answer short (a cache must not keep such a body) and true otherwise.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import type { PluginDefinition } from '../../../src/pdk/index.ts';
import { request, startUpstream, type Upstream } from '../../helpers/gateway.ts';
import { startWithRegistry, waitFor, type RegistryGateway } from '../../helpers/support.ts';

interface Seen {
  path: string;
  rawPath: string;
  complete: boolean;
}
const seen: Seen[] = [];

const witness: PluginDefinition = {
  name: 'witness',
  version: '1.0.0',
  priority: 1,
  configSchema: { type: 'record', fields: {} },
  create: () => ({
    log: (ctx) => void seen.push({ path: ctx.path, rawPath: ctx.rawPath, complete: ctx.outcome.complete }),
  }),
};

let upstream: Upstream;
let gw: RegistryGateway;

before(async () => {
  upstream = await startUpstream((req, res) => {
    res.writeHead(200, { 'content-type': 'text/plain' });
    if (!req.url?.startsWith('/cut')) return void res.end('whole');
    res.write('part');
    setTimeout(() => res.destroy(), 20);
  });
  gw = await startWithRegistry({ services: [{ name: 'u', url: upstream.url, routes: [{ name: 'all', paths: ['/'] }] }], plugins: [{ name: 'witness' }] }, new Map([['witness', witness]]));
});
after(async () => {
  await gw?.stop();
  await upstream?.close();
});

test('rawPath is the path as sent, path the normalized one', async () => {
  seen.length = 0;
  await request(`${gw.http}/a/b/%7Ex?q=1`);
  await waitFor(() => seen.length === 1, 'the log phase');
  assert.deepEqual({ path: seen[0].path, rawPath: seen[0].rawPath }, { path: '/a/b/~x', rawPath: '/a/b/%7Ex' });
});

test('outcome.complete: true for a whole answer, false for one the upstream cut short', async () => {
  seen.length = 0;
  assert.equal((await request(`${gw.http}/whole`)).text, 'whole');
  await assert.rejects(request(`${gw.http}/cut`));
  await waitFor(() => seen.length === 2, 'the log phases');
  assert.deepEqual(seen.map((s) => s.complete), [true, false]);
});
