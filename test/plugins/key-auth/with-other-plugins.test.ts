/**
 * The plugins that need an identified caller work behind key-auth as behind oauth2: metering accepts a
 * route whose authentication is key-auth (the plugin index tells it that an `authenticates` plugin runs
 * first) and serves its callers, and refuses a route without one; the caller is the consumer key-auth
 * identified, counted by consumer on /metrics.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { loadConfigText } from '../../../src/config/load.ts';
import { bundledPlugins } from '../../../src/plugins.ts';
import { request, startGateway, startUpstream, type TestGateway, type Upstream } from '../../helpers/gateway.ts';

let gw: TestGateway;
let upstream: Upstream;

const meteringRoute = (plugins: Record<string, unknown>[]) => ({
  _format_version: '3.0',
  routes: [{ name: 'metering', paths: ['/v3/metering'], strip_path: false, plugins: [...plugins, { name: 'metering', config: {} }] }],
  consumers: [{ username: 'producer', keyauth_credentials: [{ key: 'producer-key' }] }],
});

before(async () => {
  upstream = await startUpstream();
  const config = meteringRoute([{ name: 'key-auth' }]);
  gw = await startGateway({
    ...config,
    services: [{ name: 'echo', url: upstream.url, routes: [{ name: 'keyed', paths: ['/keyed'], plugins: [{ name: 'key-auth' }] }] }],
  });
});
after(async () => {
  await gw?.stop();
  await upstream?.close();
});

describe('behind key-auth', () => {
  it('WO01 metering needs an authentication plugin before it: key-auth is one', () => {
    const withKeyAuth = loadConfigText(JSON.stringify(meteringRoute([{ name: 'key-auth' }])), '/tmp/m.yaml', bundledPlugins);
    assert.equal(withKeyAuth.ok, true, String(!withKeyAuth.ok && withKeyAuth.errors.join('\n')));
    const without = loadConfigText(JSON.stringify(meteringRoute([])), '/tmp/m.yaml', bundledPlugins);
    assert.equal(without.ok, false);
    assert.match(String(!without.ok && without.errors[0]), /metering needs an authentication plugin/);
  });

  it("WO02 metering serves key-auth's callers and refuses others", async () => {
    const event = { specversion: '1.0', id: 'e-1', source: 'test', type: 'request', subject: 'producer' };
    const events = (headers: Record<string, string>) =>
      request(`${gw.http}/v3/metering/events`, { method: 'POST', headers: { 'content-type': 'application/cloudevents+json', ...headers }, body: JSON.stringify(event) });
    assert.equal((await events({})).status, 401);
    const accepted = await events({ apikey: 'producer-key' });
    assert.equal(accepted.status, 202, accepted.text);
  });

  it("WO03 the consumer key-auth identified is counted on /metrics", async () => {
    for (let i = 0; i < 3; i++) assert.equal((await request(`${gw.http}/keyed/x`, { headers: { apikey: 'producer-key' } })).status, 200);
    const metrics = (await request(`${gw.admin}/metrics`)).text;
    const counted = /^tollgate_consumer_requests_total\{consumer="producer",code="200"\} (\d+)$/m.exec(metrics);
    assert.ok(counted && Number(counted[1]) >= 3, metrics.split('\n').filter((l) => l.includes('consumer')).join('\n'));
  });
});
