/**
 * Kong's bot-detection catalogue (spec/03-plugins/21-bot-detection/01-access_spec.lua,
 * 02-invalidations_spec.lua, 03-api_spec.lua) against a real gateway: regular agents pass, Kong's known
 * bots and `deny` get 403 `Forbidden`, `allow` wins over both, over HTTP/1.1 and gRPC; config changes
 * apply on reload; a bad regex is refused at load. Beyond Kong's spec: two User-Agent headers are 400,
 * and a route with no User-Agent passes.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { aroundTests, request, startGateway, startUpstream, type Reply } from '../../helpers/gateway.ts';
import { portOf, rawRequest } from '../../helpers/support.ts';
import { echoClient, grpc, startGrpcEcho, unary } from '../../fixtures/grpc-echo.ts';
import { pluginConfigErrors } from '../config-check.ts';

const HELLOWORLD = 'HelloWorld';
const FACEBOOK = 'facebookexternalhit/1.1';
const GOOGLEBOT = 'Googlebot/2.1 (+http://www.google.com/bot.html)';
const CHROME = 'Mozilla/5.0 (Macintosh; Intel Mac OS X 10_11_5) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/50.0.2661.102 Safari/537.36';

const detection = (config: Record<string, unknown>) => [{ name: 'bot-detection', config }];

describe('bot-detection (access)', () => {
  const configFor = (httpUrl: string, grpcUrl: string, bot2: Record<string, unknown> = { deny: [HELLOWORLD] }) => ({
    services: [
      {
        name: 'mock',
        url: httpUrl,
        routes: [
          { name: 'bot', hosts: ['bot.test'], plugins: detection({}) },
          { name: 'bot2', hosts: ['bot2.test'], plugins: detection(bot2) },
          { name: 'bot3', hosts: ['bot3.test'], plugins: detection({ allow: [FACEBOOK] }) },
        ],
      },
      {
        name: 'grpc',
        url: grpcUrl,
        routes: [
          { name: 'grpc1', protocols: ['grpc'], hosts: ['bot-grpc1.test'], paths: ['/tollgate.test.Echo/'], plugins: detection({}) },
          { name: 'grpc2', protocols: ['grpc'], hosts: ['bot-grpc2.test'], paths: ['/tollgate.test.Echo/'], plugins: detection({ deny: [HELLOWORLD] }) },
          { name: 'grpc3', protocols: ['grpc'], hosts: ['bot-grpc3.test'], paths: ['/tollgate.test.Echo/'], plugins: detection({ allow: [FACEBOOK] }) },
        ],
      },
    ],
  });

  const env = aroundTests(async () => {
    const upstream = await startUpstream();
    const grpcUpstream = await startGrpcEcho();
    const urls = { http: upstream.url, grpc: `grpc://127.0.0.1:${grpcUpstream.port}` };
    const gw = await startGateway(configFor(urls.http, urls.grpc));
    return {
      gw,
      urls,
      async close() {
        await gw.stop();
        await upstream.close();
        await grpcUpstream.close();
      },
    };
  });

  const get = (host: string, userAgent?: string): Promise<Reply> =>
    request(`${env.gw.http}/request`, { headers: userAgent === undefined ? { host } : { host, 'user-agent': userAgent } });

  async function assertForbidden(host: string, userAgent: string): Promise<void> {
    const res = await get(host, userAgent);
    assert.equal(res.status, 403, userAgent);
    assert.equal(res.json().message, 'Forbidden');
    assert.equal(typeof res.json().request_id, 'string', 'kong.response.error carries the request id');
  }

  /** A gRPC call whose User-Agent starts with `userAgent` (grpc-js appends its own). */
  async function grpcCall(host: string, userAgent?: string): Promise<number> {
    const channel: grpc.ChannelOptions = { 'grpc.default_authority': host, ...(userAgent ? { 'grpc.primary_user_agent': userAgent } : {}) };
    const client = echoClient(new URL(env.gw.h2c).host, { channel });
    try {
      await unary(client, { message: 'x' });
      return grpc.status.OK;
    } catch (err) {
      return (err as grpc.ServiceError).code;
    } finally {
      client.close();
    }
  }

  test('allows regular requests', async () => {
    for (const agent of [undefined, CHROME, HELLOWORLD, 'curl/7.43.0']) assert.equal((await get('bot.test', agent)).status, 200, agent);
  });

  test('allows regular requests #grpc', async () => {
    for (const agent of [undefined, CHROME, HELLOWORLD, 'curl/7.43.0']) assert.equal(await grpcCall('bot-grpc1.test', agent), grpc.status.OK, agent);
  });

  test('blocks bots', async () => {
    await assertForbidden('bot.test', GOOGLEBOT);
    await assertForbidden('bot.test', FACEBOOK);
  });

  test('blocks bots #grpc', async () => {
    assert.equal(await grpcCall('bot-grpc1.test', GOOGLEBOT), grpc.status.PERMISSION_DENIED);
    assert.equal(await grpcCall('bot-grpc1.test', FACEBOOK), grpc.status.PERMISSION_DENIED);
  });

  test('blocks denied user-agents', () => assertForbidden('bot2.test', HELLOWORLD));

  test('blocks denied user-agents #grpc', async () => {
    assert.equal(await grpcCall('bot-grpc2.test', HELLOWORLD), grpc.status.PERMISSION_DENIED);
  });

  test('allows allowed user-agents', async () => {
    assert.equal((await get('bot3.test', FACEBOOK)).status, 200);
  });

  test('allows allowed user-agents #grpc', async () => {
    assert.equal(await grpcCall('bot-grpc3.test', FACEBOOK), grpc.status.OK);
  });

  test('two User-Agent headers are refused with 400', async () => {
    const head = ['GET /request HTTP/1.1', 'Host: bot.test', `User-Agent: ${CHROME}`, 'User-Agent: curl/7.43.0'];
    const res = await rawRequest(portOf(env.gw.http), head);
    assert.equal(res.status, 400);
    assert.equal(JSON.parse(res.body).message, 'Only one User-Agent header allowed');
  });

  test('blocks a newly entered user-agent, and allows a newly allowed one, on reload', async () => {
    assert.equal((await get('bot2.test', 'helloworld')).status, 200);
    assert.ok(await env.gw.reload(configFor(env.urls.http, env.urls.grpc, { deny: ['helloworld'] })));
    await assertForbidden('bot2.test', 'helloworld');
    await assertForbidden('bot2.test', FACEBOOK);
    assert.ok(await env.gw.reload(configFor(env.urls.http, env.urls.grpc, { allow: [FACEBOOK] })));
    assert.equal((await get('bot2.test', FACEBOOK)).status, 200);
  });
});

describe('bot-detection (schema)', () => {
  test('a regex the engine cannot run is refused with its position', async () => {
    assert.deepEqual(await pluginConfigErrors('bot-detection', { allow: ['[[['] }), [
      "config.allow[0]: not a valid regex: [[[ (missing closing ]: `[[[`, at position 0)",
    ]);
    assert.deepEqual(await pluginConfigErrors('bot-detection', { deny: ['(?=bot)'] }), [
      'config.deny[0]: not a valid regex: (?=bot) (a lookahead is not supported by the linear-time engine (RE2), at position 0)',
    ]);
  });

  test('the defaults load: empty lists, Kong\'s bot list alone', async () => {
    assert.deepEqual(await pluginConfigErrors('bot-detection', {}), []);
  });
});
