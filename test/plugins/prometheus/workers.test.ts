/**
 * prometheus on a node of two worker processes: each worker counts the requests it serves, and a scrape
 * of either worker reports the node's totals (Kong's workers count into one shared dictionary), counters
 * and histograms alike.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { request, spawnGateway, startUpstream, type SpawnedGateway, type Upstream } from '../../helpers/gateway.ts';
import { waitFor } from '../../helpers/support.ts';

const REQUESTS = 24;
let upstream: Upstream;
let gw: SpawnedGateway;

before(async () => {
  upstream = await startUpstream();
  gw = await spawnGateway({
    gateway: { proxy_listen: ['127.0.0.1:0'], admin_listen: ['127.0.0.1:0'], log_level: 'info', worker_processes: 2 },
    services: [{ name: 'echo', url: upstream.url, routes: [{ name: 'counted', paths: ['/counted'] }] }],
    plugins: [{ name: 'prometheus', config: { status_code_metrics: true, latency_metrics: true, bandwidth_metrics: true } }],
  });
});

after(async () => {
  gw?.kill('SIGKILL');
  await upstream?.close();
});

/** The pids of the workers that wrote access-log lines for `path`. */
function servingPids(path: string): Set<number> {
  const lines = gw.output().split('\n').filter((l) => l.includes('"type":"access"') && l.includes(path));
  return new Set(lines.map((l) => JSON.parse(l).pid as number));
}

test('a scrape of any worker reports the requests of every worker', async () => {
  // A new connection per request: the workers take turns accepting them.
  for (let i = 0; i < REQUESTS; i++) assert.equal((await request(`${gw.http}/counted/${i}`)).status, 200);
  await waitFor(() => servingPids('/counted/').size === 2, 'both workers to have served');
  await waitFor(() => gw.output().split('"type":"access"').length - 1 >= REQUESTS, 'every access line');

  const answeredBy = new Set<number>();
  for (let i = 0; i < 200 && answeredBy.size < 2; i++) {
    const info = (await request(`${gw.admin}/status/traffic`)).json();
    answeredBy.add(info.pid);
    assert.equal(info.processes.length, 2, 'the counts of both workers');
    assert.deepEqual(info.routes.find((r: any) => r.route === 'counted').requests, { 200: REQUESTS });
    const text = (await request(`${gw.admin}/metrics`)).text;
    assert.ok(text.includes(`tollgate_http_requests_total{route="counted",service="echo",code="200"} ${REQUESTS}`), 'the core\'s counters are summed too');
    assert.ok(text.includes(`tollgate_request_latency_ms_count{route="counted",service="echo"} ${REQUESTS}`));
    assert.ok(text.includes(`kong_http_requests_total{service="echo",route="counted",code="200",source="service",workspace="default",consumer=""} ${REQUESTS}`), text);
    assert.ok(text.includes(`kong_request_latency_ms_count{service="echo",route="counted",workspace="default"} ${REQUESTS}`), 'histograms are summed too');
    assert.ok(text.includes(`kong_request_latency_ms_bucket{service="echo",route="counted",workspace="default",le="+Inf"} ${REQUESTS}`));
    assert.equal(text.match(/^kong_node_info/gm)?.length, 1, 'one node');
  }
  assert.equal(answeredBy.size, 2, 'both workers answered scrapes');
});
