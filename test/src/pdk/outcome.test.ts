/**
 * What the outcome tells a plugin's log phase: `outcome.complete`, false when the upstream cut its answer
 * short (a cache must not keep such a body) and true otherwise.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import type { PluginDefinition } from '../../../src/pdk/index.ts';
import { request, startUpstream, type Upstream } from '../../helpers/gateway.ts';
import { startWithRegistry, waitFor, type RegistryGateway } from '../../helpers/support.ts';

const seen: boolean[] = [];

const witness: PluginDefinition = {
  name: 'witness',
  version: '1.0.0',
  priority: 1,
  configSchema: { type: 'record', fields: {} },
  create: () => ({
    log: (ctx) => void seen.push(ctx.outcome.complete),
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

test('outcome.complete: true for a whole answer, false for one the upstream cut short', async () => {
  seen.length = 0;
  assert.equal((await request(`${gw.http}/whole`)).text, 'whole');
  await assert.rejects(request(`${gw.http}/cut`));
  await waitFor(() => seen.length === 2, 'the log phases');
  assert.deepEqual(seen, [true, false]);
});
