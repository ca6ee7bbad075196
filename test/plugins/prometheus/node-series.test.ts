/**
 * Kong's node-level series and target health (spec/03-plugins/26-prometheus/04-status_api_spec.lua) and
 * ingress bandwidth counted as nginx's $request_length: kong_nginx_connections_total by state,
 * kong_nginx_requests_total, kong_datastore_reachable, kong_memory_workers_lua_vms_bytes per process,
 * kong_upstream_target_health with 1 on each target address's state and 0 on the three others (dns_error
 * for a name that does not resolve), only once some instance sets upstream_health_metrics.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { request, startGateway, startUpstream, type TestGateway, type Upstream } from '../../helpers/gateway.ts';
import { portOf, rawRequest } from '../../helpers/support.ts';

const UUID = '[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}';
const STATES = ['healthchecks_off', 'healthy', 'unhealthy', 'dns_error'];

async function scrape(gw: TestGateway): Promise<string> {
  const res = await request(`${gw.admin}/metrics`);
  assert.equal(res.status, 200);
  return res.text;
}

/** The four lines of one target address: 1 on `state`, 0 on the others. */
function assertTargetHealth(body: string, upstream: string, target: string, address: string, state: string): void {
  for (const s of STATES) {
    const line = `kong_upstream_target_health{upstream="${upstream}",target="${target}",address="${address}",state="${s}",subsystem="http"} ${s === state ? 1 : 0}`;
    assert.ok(body.includes(line), `missing ${line} in\n${body}`);
  }
}

describe('prometheus (node series)', () => {
  let upstream: Upstream;
  let gw: TestGateway;
  let target: string;

  before(async () => {
    upstream = await startUpstream((_req, res) => res.end('ok'));
    target = `127.0.0.1:${portOf(upstream.url)}`;
    gw = await startGateway({
      services: [
        { name: 'plain', url: upstream.url, routes: [{ name: 'bw', paths: ['/bw'] }] },
        { name: 'checked', host: 'mock-upstream', routes: [{ name: 'checked', paths: ['/checked'] }] },
      ],
      upstreams: [
        {
          name: 'mock-upstream',
          healthchecks: { passive: { unhealthy: { http_failures: 1 } } },
          targets: [{ target }, { target: '127.0.0.1:1' }, { target: 'some-random-dns.invalid:80' }],
        },
        { name: 'mock-upstream-healthchecksoff', targets: [{ target }] },
      ],
      plugins: [{ name: 'prometheus', config: { bandwidth_metrics: true, upstream_health_metrics: true } }],
    });
  });

  after(async () => {
    await gw?.stop();
    await upstream?.close();
  });

  test('the node series: connections by state, requests, datastore, each process memory', async () => {
    assert.equal((await request(`${gw.http}/bw`)).status, 200);
    const body = await scrape(gw);
    for (const state of ['accepted', 'handled', 'total', 'active', 'reading', 'writing', 'waiting']) {
      assert.match(body, new RegExp(`^kong_nginx_connections_total\\{node_id="${UUID}",subsystem="http",state="${state}"\\} \\d+$`, 'm'));
    }
    const total = Number(new RegExp(`^kong_nginx_requests_total\\{node_id="${UUID}",subsystem="http"\\} (\\d+)$`, 'm').exec(body)?.[1]);
    assert.ok(total >= 1, body);
    assert.match(body, /^kong_datastore_reachable 1$/m);
    assert.match(body, new RegExp(`^kong_memory_workers_lua_vms_bytes\\{node_id="${UUID}",pid="\\d+",kong_subsystem="http"\\} [1-9]\\d*$`, 'm'));
  });

  test('bandwidth counts whole messages, heads included, as $request_length and $bytes_sent', async () => {
    const head = ['POST /bw?x=1 HTTP/1.1', 'Host: example.test', 'X-Padding: 0123456789', 'Content-Length: 5', 'Connection: close'];
    const sent = Buffer.byteLength(head.join('\r\n') + '\r\n\r\nhello');
    const bandwidth = async (direction: string) => {
      const pattern = new RegExp(`kong_bandwidth_bytes\\{service="plain",route="bw",direction="${direction}",workspace="default",consumer=""\\} (\\d+)`);
      return Number(pattern.exec(await scrape(gw))?.[1] ?? 0);
    };
    const [ingress, egress] = [await bandwidth('ingress'), await bandwidth('egress')];
    const reply = await rawRequest(portOf(gw.http), head, 'hello');
    assert.equal(reply.status, 200);
    assert.equal((await bandwidth('ingress')) - ingress, sent);
    // What went out, less what is written after the plugins' response phase: the latency and request id
    // headers, and Connection (Node's).
    const received = reply.raw.replace(/^(x-kong-upstream-latency|x-kong-proxy-latency|x-kong-request-id|connection): [^\r]*\r\n/gim, '').length;
    assert.equal((await bandwidth('egress')) - egress, received);
  });

  test('target health: healthchecks_off, healthy, unhealthy and dns_error, each address with its four states', async () => {
    let body = await scrape(gw);
    assertTargetHealth(body, 'mock-upstream-healthchecksoff', target, target, 'healthchecks_off');
    assertTargetHealth(body, 'mock-upstream', target, target, 'healthy');
    assertTargetHealth(body, 'mock-upstream', 'some-random-dns.invalid:80', '', 'dns_error');
    const put = await request(`${gw.admin}/upstreams/mock-upstream/targets/127.0.0.1:1/unhealthy`, { method: 'PUT' });
    assert.equal(put.status, 204);
    body = await scrape(gw);
    assertTargetHealth(body, 'mock-upstream', '127.0.0.1:1', '127.0.0.1:1', 'unhealthy');
  });
});

describe('prometheus (node series, no upstream_health_metrics)', () => {
  let gw: TestGateway;

  before(async () => {
    gw = await startGateway({
      upstreams: [{ name: 'mock-upstream', targets: [{ target: '127.0.0.1:1' }] }],
      plugins: [{ name: 'prometheus', config: {} }],
    });
  });

  after(async () => {
    await gw?.stop();
  });

  test('no kong_upstream_target_health unless an instance asks for it; the node series regardless', async () => {
    const body = await scrape(gw);
    assert.doesNotMatch(body, /kong_upstream_target_health/);
    assert.match(body, /^kong_datastore_reachable 1$/m);
  });
});
