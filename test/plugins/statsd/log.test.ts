/**
 * Kong's statsd plugin (spec/03-plugins/06-statsd/{01-log,02-schema,03-allow_status_codes}_spec.lua)
 * against a real UDP listener (and a TCP one for use_tcp): the default metrics with Kong's names and
 * scopes, per-user metrics by the consumer's custom_id, each tag style, prefix and hostname_in_prefix,
 * packing into udp_packet_size datagrams, allow_status_codes, and the schema's conditional sample_rate.
 */
import assert from 'node:assert/strict';
import dgram from 'node:dgram';
import { once } from 'node:events';
import net, { type AddressInfo } from 'node:net';
import { hostname } from 'node:os';
import { after, before, describe, test } from 'node:test';
import { request, startGateway, startUpstream, type TestGateway, type Upstream } from '../../helpers/gateway.ts';
import { portOf, rawRequest, waitFor } from '../../helpers/support.ts';
import { pluginConfigErrors } from '../config-check.ts';

const UUID = '[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}';
const HOST = hostname().replace(/\./g, '_');
const KEY = { apikey: 'kong' };

describe('statsd', () => {
  let upstream: Upstream;
  let udp: dgram.Socket;
  let udpPort: number;
  let tcp: net.Server;
  let tcpPort: number;
  const datagrams: string[] = [];
  const tcpText: string[] = [];
  let gw: TestGateway;
  let config: Record<string, any>;

  const lines = () => datagrams.flatMap((d) => d.split('\n'));
  /** Waits until the lines matching `pattern` number `count`, and gives them. */
  const linesLike = (pattern: RegExp, count = 1) => waitFor(() => {
    const found = lines().filter((l) => pattern.test(l));
    return found.length >= count && found;
  }, `${count} lines like ${pattern}`);

  before(async () => {
    upstream = await startUpstream((req, res) => {
      res.statusCode = Number(/\/status\/(\d+)/.exec(req.url ?? '')?.[1] ?? 200);
      res.end('{"ok":true}');
    });
    udp = dgram.createSocket('udp4');
    udp.on('message', (m) => datagrams.push(m.toString()));
    udp.bind(0, '127.0.0.1');
    await once(udp, 'listening');
    udpPort = udp.address().port;
    tcp = net.createServer((socket) => socket.on('data', (d) => tcpText.push(d.toString())));
    tcp.listen(0, '127.0.0.1');
    await once(tcp, 'listening');
    tcpPort = (tcp.address() as AddressInfo).port;

    const statsd = (config: Record<string, unknown> = {}) => ({ name: 'statsd', config: { host: '127.0.0.1', port: udpPort, ...config } });
    const service = (name: string, plugins: unknown[], auth = true) => ({
      name,
      url: upstream.url,
      routes: [{ name: `${name}-route`, paths: [`/${name}`], plugins: [...(auth ? [{ name: 'key-auth' }] : []), ...plugins] }],
    });
    config = {
      services: [
        service('statsd1', [statsd()]),
        service('statsd-dog', [statsd({ tag_style: 'dogstatsd', prefix: 'dog' })]),
        service('statsd-influx', [statsd({ tag_style: 'influxdb', prefix: 'influx', metrics: [{ name: 'request_count', stat_type: 'counter', sample_rate: 1 }] })]),
        service('statsd-librato', [statsd({ tag_style: 'librato', prefix: 'librato', metrics: [{ name: 'request_count', stat_type: 'counter', sample_rate: 1 }] })]),
        service('statsd-signalfx', [statsd({ tag_style: 'signalfx', prefix: 'signalfx', metrics: [{ name: 'request_count', stat_type: 'counter', sample_rate: 1 }] })]),
        service('statsd13', [statsd({ prefix: 'prefix', hostname_in_prefix: true, metrics: [{ name: 'request_count', stat_type: 'counter', sample_rate: 0.5 }, { name: 'latency', stat_type: 'timer' }] })]),
        service('statsd-packed', [statsd({ prefix: 'packed', udp_packet_size: 200 })]),
        service('statsd-size', [statsd({ prefix: 'size', metrics: [{ name: 'request_size', stat_type: 'counter', sample_rate: 1 }] })], false),
        service('statsd-allow', [statsd({ prefix: 'allow', allow_status_codes: ['200-205', '400-499'], metrics: [{ name: 'status_count', stat_type: 'counter', sample_rate: 1 }] })], false),
        service('statsd-tcp', [statsd({ prefix: 'tcp', use_tcp: true, port: tcpPort, metrics: [{ name: 'request_count', stat_type: 'counter', sample_rate: 1 }] })], false),
      ],
      consumers: [{ username: 'bob', custom_id: 'robert', keyauth_credentials: [{ key: 'kong' }] }],
    };
    gw = await startGateway(config);
  });

  after(async () => {
    await gw?.stop();
    await upstream?.close();
    udp?.close();
    await new Promise((done) => tcp?.close(done));
  });

  test("the default metrics, under service.<name>, the consumer's custom_id in the per-user ones", async () => {
    assert.equal((await request(`${gw.http}/statsd1/request`, { headers: KEY })).status, 200);
    const got = await linesLike(/^kong\.(service\.statsd1|route)\./, 12);
    const expected = [
      /^kong\.service\.statsd1\.request\.count:1\|c$/,
      /^kong\.service\.statsd1\.request\.size:\d+\|c$/,
      /^kong\.service\.statsd1\.response\.size:\d+\|c$/,
      /^kong\.service\.statsd1\.latency:\d+\|ms$/,
      /^kong\.service\.statsd1\.status\.200:1\|c$/,
      /^kong\.service\.statsd1\.upstream_latency:\d+\|ms$/,
      /^kong\.service\.statsd1\.kong_latency:\d+\|ms$/,
      /^kong\.service\.statsd1\.user\.uniques:robert\|s$/,
      /^kong\.service\.statsd1\.user\.robert\.request\.count:1\|c$/,
      /^kong\.service\.statsd1\.user\.robert\.status\.200:1\|c$/,
      new RegExp(`^kong\\.service\\.statsd1\\.workspace\\.${UUID}\\.status\\.200:1\\|c$`),
      new RegExp(`^kong\\.route\\.${UUID}\\.user\\.robert\\.status\\.200:1\\|c$`),
    ];
    for (const pattern of expected) assert.ok(got.some((l) => pattern.test(l)), `${pattern} in\n${got.join('\n')}`);
    assert.equal(got.length, expected.length, 'shdict_usage sends nothing');
  });

  test('dogstatsd: no scope in the name, the tags after #; no per-user metrics', async () => {
    assert.equal((await request(`${gw.http}/statsd-dog`, { headers: KEY })).status, 200);
    const [count] = await linesLike(/^dog\.request\.count/);
    const tags = `service:statsd-dog,route:statsd-dog-route,workspace:[0-9a-f-]{36},consumer:robert,node:${HOST},status:200`;
    assert.match(count, new RegExp(`^dog\\.request\\.count:1\\|c\\|#${tags}$`));
    const all = await linesLike(/^dog\./, 6);
    for (const name of ['request.size', 'response.size', 'latency', 'upstream_latency', 'kong_latency']) assert.ok(all.some((l) => l.startsWith(`dog.${name}:`)), name);
    assert.ok(!all.some((l) => l.includes('user') || l.includes('.status.')));
  });

  test('influxdb, librato and signalfx tags', async () => {
    for (const style of ['influx', 'librato', 'signalfx']) assert.equal((await request(`${gw.http}/statsd-${style}`, { headers: KEY })).status, 200);
    const tags = `service=statsd-%s,route=statsd-%s-route,workspace=[0-9a-f-]{36},consumer=robert,node=${HOST},status=200`;
    const of = (style: string) => tags.replaceAll('%s', style);
    assert.match((await linesLike(/^influx\./))[0], new RegExp(`^influx\\.request\\.count,${of('influx')}:1\\|c$`));
    assert.match((await linesLike(/^librato\./))[0], new RegExp(`^librato\\.request\\.count#${of('librato')}:1\\|c$`));
    assert.match((await linesLike(/^signalfx\./))[0], new RegExp(`^signalfx\\.request\\.count\\[${of('signalfx')}\\]:1\\|c$`));
  });

  test('prefix, hostname_in_prefix and a sample rate other than 1', async () => {
    assert.equal((await request(`${gw.http}/statsd13`, { headers: KEY })).status, 200);
    const got = await linesLike(/^prefix\./, 2);
    assert.ok(got.includes(`prefix.node.${HOST}.service.statsd13.request.count:1|c|@0.5`), got.join('\n'));
    assert.ok(got.some((l) => new RegExp(`^prefix\\.node\\.${HOST}\\.service\\.statsd13\\.latency:\\d+\\|ms$`).test(l)), got.join('\n'));
  });

  test('udp_packet_size: the lines packed into datagrams of at most that size', async () => {
    assert.equal((await request(`${gw.http}/statsd-packed`, { headers: KEY })).status, 200);
    await linesLike(/^packed\./, 12);
    const packets = datagrams.filter((d) => d.startsWith('packed.'));
    assert.ok(packets.length > 1 && packets.length < 12, `${packets.length} datagrams`);
    for (const p of packets) assert.ok(p.length <= 200, p);
  });

  test('request.size counts the request line and headers with the body ($request_length)', async () => {
    const head = ['POST /statsd-size HTTP/1.1', 'Host: example.test', 'Content-Length: 11', 'Connection: close'];
    const sent = Buffer.byteLength(head.join('\r\n') + '\r\n\r\nhello world');
    assert.equal((await rawRequest(portOf(gw.http), head, 'hello world')).status, 200);
    const [line] = await linesLike(/^size\./);
    assert.equal(line, `size.service.statsd-size.request.size:${sent}|c`);
  });

  test('allow_status_codes: only statuses within the ranges are sent', async () => {
    for (const status of [200, 300, 404, 500, 201]) assert.equal((await request(`${gw.http}/statsd-allow/status/${status}`)).status, status);
    // The datagrams of one socket arrive in order on loopback: the last one in means every earlier one is.
    await linesLike(/^allow\.service\.statsd-allow\.status\.201:/);
    assert.deepEqual(lines().filter((l) => l.startsWith('allow.')), [
      'allow.service.statsd-allow.status.200:1|c',
      'allow.service.statsd-allow.status.404:1|c',
      'allow.service.statsd-allow.status.201:1|c',
    ]);
  });

  test('use_tcp: each line with a newline over TCP', async () => {
    assert.equal((await request(`${gw.http}/statsd-tcp`)).status, 200);
    await waitFor(() => tcpText.join('').includes('\n'), 'a TCP line');
    assert.equal(tcpText.join(''), 'tcp.service.statsd-tcp.request.count:1|c\n');
  });

  test('a reload (as SIGHUP) applies a new prefix to the next requests', async () => {
    const reloaded = structuredClone(config);
    reloaded.services.find((s: any) => s.name === 'statsd-size').routes[0].plugins[0].config.prefix = 'resized';
    assert.equal(await gw.reload(reloaded), true);
    assert.equal((await request(`${gw.http}/statsd-size`)).status, 200);
    assert.match((await linesLike(/^resized\./))[0], /^resized\.service\.statsd-size\.request\.size:\d+\|c$/);
  });
});

describe('statsd (config)', () => {
  test("Kong's schema: counters and gauges need a sample_rate; metric names and ranges checked", async () => {
    assert.deepEqual(await pluginConfigErrors('statsd', {}), []);
    assert.deepEqual(await pluginConfigErrors('statsd', { metrics: [{ name: 'request_count', stat_type: 'counter' }] }), ['config.metrics[0].sample_rate: required field missing']);
    assert.deepEqual(await pluginConfigErrors('statsd', { metrics: [{ name: 'latency', stat_type: 'timer' }] }), []);
    const [name] = await pluginConfigErrors('statsd', { metrics: [{ name: 'nope', stat_type: 'timer' }] });
    assert.match(name, /^config\.metrics\[0\]\.name: expected one of: kong_latency, latency/);
    assert.equal((await pluginConfigErrors('statsd', { allow_status_codes: ['200'] })).length, 1);
  });
});
