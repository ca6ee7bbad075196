/**
 * Kong's udp-log (spec/03-plugins/02-udp-log/01-udp-log_spec.lua) against a real UDP listener: one JSON
 * datagram per request with latencies that add up, values other plugins set, and the schema.
 */
import assert from 'node:assert/strict';
import dgram from 'node:dgram';
import type { AddressInfo } from 'node:net';
import { after, before, test } from 'node:test';
import { request, startGateway, startUpstream, type TestGateway, type Upstream } from '../../helpers/gateway.ts';
import { waitFor } from '../../helpers/support.ts';
import { pluginConfigErrors } from '../config-check.ts';

let upstream: Upstream;
let listener: dgram.Socket;
let gw: TestGateway;
const received: any[] = [];

before(async () => {
  upstream = await startUpstream();
  listener = dgram.createSocket('udp4');
  listener.on('message', (message) => received.push(JSON.parse(message.toString())));
  await new Promise<void>((resolve) => listener.bind(0, '127.0.0.1', resolve));
  const port = (listener.address() as AddressInfo).port;
  gw = await startGateway({
    services: [{ name: 'echo', url: upstream.url, routes: [{ name: 'r', paths: ['/'] }] }],
    plugins: [
      { name: 'udp-log', config: { host: '127.0.0.1', port } },
      { name: 'correlation-id', config: { generator: 'uuid' } },
    ],
  });
});
after(async () => {
  await gw?.stop();
  await upstream?.close();
  listener?.close();
});

test('logs each request as one JSON datagram', async () => {
  assert.equal((await request(`${gw.http}/udp?x=1`)).status, 200);
  const [entry] = await waitFor(() => received.length >= 1 && received, 'the datagram');
  assert.equal(entry.request.uri, '/udp?x=1');
  assert.equal(entry.response.status, 200);
  assert.ok(1 + entry.latencies.request >= entry.latencies.kong + entry.latencies.proxy);
  assert.equal(typeof entry.correlation_id, 'string');
});

test("udp-log config: Kong's fields; Lua refused", async () => {
  assert.deepEqual(await pluginConfigErrors('udp-log', { host: '127.0.0.1', port: 514 }), []);
  assert.deepEqual(await pluginConfigErrors('udp-log', { host: '127.0.0.1' }), ['config.port: required field missing']);
  assert.deepEqual(await pluginConfigErrors('udp-log', { host: 'bad host!', port: 514 }), ['config.host: invalid value: bad host!']);
  const [lua] = await pluginConfigErrors('udp-log', { host: '127.0.0.1', port: 514, custom_fields_by_lua: { a: 'return 1' } });
  assert.match(lua, /Tollgate does not run Lua/);
});
