/**
 * Kong's ip-restriction catalogue (spec/03-plugins/17-ip-restriction/01-schema_spec.lua, 02-access_spec.lua)
 * against a real gateway: deny and allow lists, CIDR ranges, deny before allow, custom status and
 * message, IPv6, gRPC and WebSocket handshakes, the client address from a trusted proxy's X-Real-IP
 * (Kong's specs set real_ip_header to X-Forwarded-For; Tollgate believes X-Real-IP, Kong's default),
 * config changes on reload, and the schema's checks.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import http from 'node:http';
import WebSocket from 'ws';
import { request, startGateway, startUpstream, type TestGateway, type Upstream } from '../../helpers/gateway.ts';
import { echoClient, grpc, startGrpcEcho, unary, type EchoClient, type GrpcEcho } from '../../fixtures/grpc-echo.ts';
import { startWsEcho, type WsEcho } from '../../fixtures/ws-echo.ts';
import { pluginConfigErrors } from '../config-check.ts';

const restrict = (config: Record<string, unknown>) => [{ name: 'ip-restriction', config }];

describe('ip-restriction (access)', () => {
  let upstream: Upstream;
  let grpcUpstream: GrpcEcho;
  let wsUpstream: WsEcho;
  let gw: TestGateway;

  const routes: [string, Record<string, unknown>][] = [
    ['ip-restriction1.test', { deny: ['127.0.0.1', '127.0.0.2'] }],
    ['ip-restriction2.test', { deny: ['127.0.0.2'] }],
    ['ip-restriction3.test', { allow: ['127.0.0.2'] }],
    ['ip-restriction4.test', { allow: ['127.0.0.1'] }],
    ['ip-restriction5.test', { deny: ['127.0.0.0/24'] }],
    ['ip-restriction6.test', { allow: ['127.0.0.4'] }],
    ['ip-restriction7.test', { deny: ['127.0.0.4'] }],
    ['ip-restriction8.test', { allow: ['0.0.0.0/0'] }],
    ['ip-restriction9.test', { allow: ['127.0.0.1'], deny: ['127.0.0.1'] }],
    ['ip-restriction10.test', { allow: ['127.0.0.0/24'], deny: ['127.0.0.1'] }],
    ['ip-restriction11.test', { allow: ['127.0.0.0/24'], deny: ['127.0.0.0/24'] }],
    ['ip-restriction12.test', { deny: ['127.0.0.0/24'], status: 401, message: 'Forbidden' }],
    ['ip-restriction-v6-1.test', { deny: ['::1', '::2'] }],
    ['ip-restriction-v6-2.test', { deny: ['::2'] }],
    ['ip-restriction-v6-3.test', { deny: ['fe80::/64'] }],
    ['ip-restriction-v6-4.test', { allow: ['::/0'], deny: ['::1'] }],
    ['ip-restriction-v6-5.test', { allow: ['::2'] }],
    ['ip-restriction-v6-6.test', { allow: ['::1'] }],
  ];

  function config(overrides: Record<string, Record<string, unknown>> = {}): Record<string, any> {
    return {
      gateway: { trusted_ips: ['127.0.0.1/32', '::1/128'] },
      services: [
        { name: 'mock', url: upstream.url, routes: routes.map(([host, c], i) => ({ name: `r${i}`, hosts: [host], plugins: restrict(overrides[host] ?? c) })) },
        {
          name: 'grpc',
          url: `grpc://127.0.0.1:${grpcUpstream.port}`,
          routes: [
            { name: 'grpc-deny', protocols: ['grpc'], hosts: ['ip-restriction-grpc1.test'], paths: ['/tollgate.test.Echo/'], plugins: restrict({ deny: ['127.0.0.0/24'] }) },
            { name: 'grpc-allow', protocols: ['grpc'], hosts: ['ip-restriction-grpc2.test'], paths: ['/tollgate.test.Echo/'], plugins: restrict({ deny: ['127.0.0.2/32'] }) },
            { name: 'grpc-xff', protocols: ['grpc'], hosts: ['ip-restriction-grpc3.test'], paths: ['/tollgate.test.Echo/'], plugins: restrict({ allow: ['127.0.0.4/32'] }) },
          ],
        },
        { name: 'ws', url: `http://127.0.0.1:${wsUpstream.port}`, routes: [{ name: 'ws', protocols: ['ws'], paths: ['/ws'], plugins: restrict({ deny: ['127.0.0.1'] }) }] },
      ],
    };
  }

  before(async () => {
    upstream = await startUpstream();
    grpcUpstream = await startGrpcEcho();
    wsUpstream = await startWsEcho();
    gw = await startGateway(config());
  });

  after(async () => {
    for (const client of clients.values()) client.close();
    await gw?.stop();
    await upstream?.close();
    await grpcUpstream?.close();
    await wsUpstream?.close();
  });

  const get = (host: string, realIp?: string) => request(`${gw.http}/status/200`, { headers: { host, ...(realIp ? { 'x-real-ip': realIp } : {}) } });
  async function refused(host: string, realIp?: string, status = 403): Promise<string> {
    const res = await get(host, realIp);
    assert.equal(res.status, status, `${host} from ${realIp ?? 'the peer'}: ${res.text}`);
    return res.json().message;
  }
  async function allowed(host: string, realIp?: string): Promise<void> {
    const res = await get(host, realIp);
    assert.equal(res.status, 200, `${host} from ${realIp ?? 'the peer'}: ${res.text}`);
  }
  const clients = new Map<string, EchoClient>();
  const grpcCall = (host: string, realIp?: string) => {
    let client = clients.get(host);
    if (!client) clients.set(host, (client = echoClient(new URL(gw.h2c).host, { channel: { 'grpc.default_authority': host } })));
    return unary(client, { message: 'x' }, { metadata: realIp ? { 'x-real-ip': realIp } : {} });
  };

  test('deny: blocks a request when the IP is denied', async () => {
    assert.equal(await refused('ip-restriction1.test'), 'IP address not allowed: 127.0.0.1');
  });
  test('deny: blocks a request when the IP is denied with status/message', async () => {
    assert.equal(await refused('ip-restriction12.test', undefined, 401), 'Forbidden');
  });
  test('deny: allows a request when the IP is not denied', () => allowed('ip-restriction2.test'));
  test('deny: blocks IP with CIDR', async () => void (await refused('ip-restriction5.test')));
  test('deny: blocks an IP on a allowed CIDR range', async () => void (await refused('ip-restriction10.test')));
  test('deny: takes precedence over an allowed IP', async () => void (await refused('ip-restriction9.test')));
  test('deny: takes precedence over an allowed CIDR range', async () => void (await refused('ip-restriction11.test')));
  test('deny, client address: allows without any X-Real-IP and allowed IP', () => allowed('ip-restriction7.test'));
  test('deny, client address: allows with an allowed X-Real-IP', () => allowed('ip-restriction7.test', '127.0.0.3'));
  test('deny, client address: blocks with a denied X-Real-IP', async () => {
    assert.equal(await refused('ip-restriction7.test', '127.0.0.4'), 'IP address not allowed: 127.0.0.4');
  });
  test('allow: blocks a request when the IP is not allowed', async () => void (await refused('ip-restriction3.test')));
  test('allow: allows a allowed IP', () => allowed('ip-restriction4.test'));
  test('allow, client address: blocks without any X-Real-IP and not allowed IP', async () => void (await refused('ip-restriction6.test')));
  test('allow, client address: blocks with a not allowed X-Real-IP', async () => void (await refused('ip-restriction6.test', '127.0.0.3')));
  test('allow, client address: allows with an allowed X-Real-IP', () => allowed('ip-restriction6.test', '127.0.0.4'));
  test('#regression handles a CIDR entry with 0.0.0.0/0', () => allowed('ip-restriction8.test'));

  test('X-Real-IP from a peer that is not trusted is not believed: the peer address is checked', async () => {
    const res = await fromAddress('127.0.0.2', `${gw.http}/status/200`, { host: 'ip-restriction6.test', 'x-real-ip': '127.0.0.4' });
    assert.equal(res.status, 403);
    assert.equal(JSON.parse(res.body).message, 'IP address not allowed: 127.0.0.2');
    const peer = await fromAddress('127.0.0.2', `${gw.http}/status/200`, { host: 'ip-restriction2.test' });
    assert.equal(peer.status, 403, 'deny 127.0.0.2 applies to the real peer');
  });

  test('an unusable client address is refused with Kong\'s message', async () => {
    assert.equal(await refused('ip-restriction8.test', 'not-an-ip'), 'Cannot identify the client IP address, unix domain sockets are not supported.');
  });

  test('IPv6: blocks a request when the IPv6 is denied', async () => void (await refused('ip-restriction-v6-1.test', '::1')));
  test('IPv6: allows a request when the IPv6 is not denied', () => allowed('ip-restriction-v6-2.test', '::1'));
  test('IPv6: blocks the IPv6 with CIDR', async () => void (await refused('ip-restriction-v6-3.test', 'fe80::1')));
  test('IPv6: takes precedence over an allowed IPv6 CIDR range', async () => void (await refused('ip-restriction-v6-4.test', '::1')));
  test('IPv6: blocks a request when the IPv6 is not allowed', async () => void (await refused('ip-restriction-v6-5.test', '::1')));
  test('IPv6: allows a allowed IPv6', () => allowed('ip-restriction-v6-6.test', '::1'));

  test('#grpc blocks a request when the IP is denied', async () => {
    const err = await grpcCall('ip-restriction-grpc1.test').then(() => assert.fail('expected a refusal'), (e: grpc.ServiceError) => e);
    assert.equal(err.code, grpc.status.PERMISSION_DENIED);
    assert.equal(err.details, 'IP address not allowed: 127.0.0.1');
  });
  test('#grpc allows a request when the IP is not denied', async () => {
    const { reply } = await grpcCall('ip-restriction-grpc2.test');
    assert.equal(reply.message, 'x');
  });
  test('#grpc block with a not allowed client address', async () => {
    const err = await grpcCall('ip-restriction-grpc3.test', '127.0.0.3').then(() => assert.fail('expected a refusal'), (e: grpc.ServiceError) => e);
    assert.equal(err.code, grpc.status.PERMISSION_DENIED);
  });
  test('#grpc allows with an allowed client address', async () => {
    const { reply } = await grpcCall('ip-restriction-grpc3.test', '127.0.0.4');
    assert.equal(reply.message, 'x');
  });

  test('a WebSocket handshake from a denied address is refused with 403 before any upgrade', async () => {
    const ws = new WebSocket(`${gw.http.replace('http', 'ws')}/ws`);
    const status = await new Promise<number>((resolve, reject) => {
      ws.once('unexpected-response', (_req, res) => resolve(res.statusCode ?? 0));
      ws.once('open', () => reject(new Error('the upgrade went through')));
      ws.once('error', reject);
    });
    assert.equal(status, 403);
  });

  test('supports config changes without restarting', async () => {
    await allowed('ip-restriction2.test');
    assert.ok(await gw.reload(config({ 'ip-restriction2.test': { deny: ['127.0.0.1', '127.0.0.2'] } })));
    await refused('ip-restriction2.test');
    assert.ok(await gw.reload(config({ 'ip-restriction2.test': { deny: ['127.0.0.2', '127.0.0.3'] } })));
    await allowed('ip-restriction2.test');
  });
});

/** A GET sent from another loopback address (Linux routes all of 127.0.0.0/8 to lo). */
function fromAddress(localAddress: string, url: string, headers: Record<string, string>): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = http.get(url, { localAddress, headers, agent: false }, (res) => {
      let body = '';
      res.on('data', (c) => (body += c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
    });
    req.on('error', reject);
  });
}

describe('ip-restriction (schema)', () => {
  const check = (config: Record<string, unknown>) => pluginConfigErrors('ip-restriction', config);

  test('should accept a valid allow', async () => assert.deepEqual(await check({ allow: ['127.0.0.1/32', '127.0.0.2/32'] }), []));
  test('should accept a valid allow and status/message', async () => assert.deepEqual(await check({ allow: ['127.0.0.1/32'], status: 403, message: 'Forbidden' }), []));
  test('should accept a valid cidr range', async () => assert.deepEqual(await check({ allow: ['127.0.0.1/8'] }), []));
  test('should accept a valid deny', async () => assert.deepEqual(await check({ deny: ['127.0.0.1/32', '127.0.0.2/32'] }), []));
  test('should accept both non-empty allow and deny', async () => assert.deepEqual(await check({ allow: ['127.0.0.1/32'], deny: ['127.0.0.2/32'] }), []));
  test('allow should not accept invalid types', async () => assert.deepEqual(await check({ allow: 12 }), ['config.allow: expected an array']));
  test('allow should not accept invalid IPs', async () => {
    assert.deepEqual(await check({ allow: ['127.0.0.1/32', '127.0.0.2/32', 'hello'] }), ["config.allow[2]: invalid ip or cidr range: 'hello'"]);
  });
  test('deny should not accept invalid types', async () => assert.deepEqual(await check({ deny: 12 }), ['config.deny: expected an array']));
  test('deny should not accept invalid IPs', async () => {
    assert.deepEqual(await check({ deny: ['127.0.0.1/32', 'hello'] }), ["config.deny[1]: invalid ip or cidr range: 'hello'"]);
  });
  test('should not accept both empty allow and deny', async () => {
    assert.deepEqual(await check({ deny: [], allow: [] }), ["config: at least one of these fields must be non-empty: 'config.allow', 'config.deny'"]);
  });
  test('should not accept invalid cidr ranges', async () => {
    assert.deepEqual(await check({ allow: ['0.0.0.0/a', '0.0.0.0/-1', '0.0.0.0/33'] }), [
      "config.allow[0]: invalid ip or cidr range: '0.0.0.0/a'",
      "config.allow[1]: invalid ip or cidr range: '0.0.0.0/-1'",
      "config.allow[2]: invalid ip or cidr range: '0.0.0.0/33'",
    ]);
  });
  test('should not accept invalid ipv6 cidr ranges', async () => {
    const ranges = ['::/a', '::/-1', '::/129', '::1/a', '::1/-1', '::1/129'];
    assert.deepEqual(await check({ allow: ranges }), ranges.map((r, i) => `config.allow[${i}]: invalid ip or cidr range: '${r}'`));
  });
  test('should accept valid ipv6 cidr ranges', async () => assert.deepEqual(await check({ allow: ['::/0', '::/1', '::/128'] }), []));
});
