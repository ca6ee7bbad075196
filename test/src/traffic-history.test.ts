/**
 * GET /status/traffic/history's per-route series (`hour.routes`, the console's sparklines): each route of
 * the configuration with requests in the last hour, by its name or its id when unnamed, with its requests
 * by status class in the hour's 10 s buckets, exact and summed over the node's processes (run it with
 * TOLLGATE_TEST_WORKERS=2 too; the last test always starts a node of two workers and checks both served).
 * Bounded by the configuration: requests that matched no route, whatever their path, add no series, and a
 * route a reload removes takes its series with it.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { request, spawnGateway, startGateway, startUpstream, TEST_WORKERS, type TestGateway, type Upstream } from '../helpers/gateway.ts';
import { waitFor } from '../helpers/support.ts';

const CLASSES = ['1xx', '2xx', '3xx', '4xx', '5xx'];

let upstream: Upstream;
let gw: TestGateway;

/**
 * An unnamed route, and two named ones (one never called), on an upstream answering the status its path
 * ends with. The unnamed route comes first: its id is derived from its place, which the reload without
 * `orders` keeps.
 */
function config(withOrders = true): Record<string, any> {
  const orders = { name: 'orders', paths: ['/orders'] };
  return {
    services: [
      {
        name: 'shop',
        url: upstream.url,
        routes: [{ paths: ['/unnamed'] }, ...(withOrders ? [orders] : []), { name: 'idle', paths: ['/idle'] }],
      },
    ],
  };
}

/** Requests to each path, by the status the upstream answers (the path's last segment); a new connection each. */
async function send(paths: Record<string, number[]>, proxy = gw.http): Promise<void> {
  for (const [path, statuses] of Object.entries(paths)) {
    for (const status of statuses) assert.equal((await request(`${proxy}${path}/${status}`)).status, status);
  }
}

interface History {
  pid: number;
  processes: number[];
  hour: { step_seconds: number; from: number; requests: Record<string, number[]>; routes: { route: string; requests: Record<string, number[]> }[] };
}

const history = async (admin = gw.admin): Promise<History> => (await request(`${admin}/status/traffic/history`)).json();

/** A series' requests per class over the hour. */
function totals(requests: Record<string, number[]>): Record<string, number> {
  return Object.fromEntries(CLASSES.map((c) => [c, requests[c].reduce((a, b) => a + b, 0)]));
}

/** Each route's totals per class, by route label, in the answer's order. */
async function routeTotals(): Promise<[string, Record<string, number>][]> {
  return (await history()).hour.routes.map((r) => [r.route, totals(r.requests)]);
}

async function unnamedId(): Promise<string> {
  const routes = (await request(`${gw.admin}/routes`)).json().data as { id: string; name: string | null }[];
  return routes.find((r) => r.name === null)!.id;
}

before(async () => {
  upstream = await startUpstream((req, res) => res.writeHead(Number(req.url!.split('/').pop())).end());
  gw = await startGateway(config());
});
after(async () => {
  await gw?.stop();
  await upstream?.close();
});

test('each route with requests in the hour: by name, or id when unnamed; exact counts per status class; unmatched requests under none', async () => {
  await send({ '/orders': [200, 200, 200, 302, 404, 404, 503], '/unnamed': [201, 201, 500] });
  // Requests no route matches, at paths of the client's choosing.
  for (let i = 0; i < 5; i++) assert.equal((await request(`${gw.http}/nowhere-${i}`)).status, 404);

  const answer = await history();
  assert.equal(answer.processes.length, Math.max(TEST_WORKERS, 1), 'summed over every process of the node');
  const id = await unnamedId();
  assert.deepEqual(
    answer.hour.routes.map((r) => r.route),
    [id, 'orders'],
    'the routes with requests, in the configuration\'s order; none for unmatched requests, none for the idle route',
  );
  const [unnamed, orders] = answer.hour.routes;
  assert.deepEqual(totals(orders.requests), { '1xx': 0, '2xx': 3, '3xx': 1, '4xx': 2, '5xx': 1 });
  assert.deepEqual(totals(unnamed.requests), { '1xx': 0, '2xx': 2, '3xx': 0, '4xx': 0, '5xx': 1 });
  for (const route of answer.hour.routes) {
    for (const c of CLASSES) assert.equal(route.requests[c].length, 360, 'the hour, by 10 s, as the node\'s series');
  }
  // The node's hour holds the routes' requests and the unmatched ones.
  assert.deepEqual(totals(answer.hour.requests), { '1xx': 0, '2xx': 5, '3xx': 1, '4xx': 2 + 5, '5xx': 2 });
  // The routes' buckets are the node's: where a route counts, the node counts at least as much.
  for (const c of CLASSES) {
    answer.hour.requests[c].forEach((n, i) => assert.ok(orders.requests[c][i] + unnamed.requests[c][i] <= n, `${c} bucket ${i}`));
  }
});

test('a reload without a route drops its series; the others keep theirs', async () => {
  const id = await unnamedId();
  const before = new Map(await routeTotals());
  assert.ok(before.has('orders'));
  assert.ok(await gw.reload(config(false)));
  await send({ '/unnamed': [200] });
  assert.equal((await request(`${gw.http}/orders/200`)).status, 404, 'the route is gone');
  const after = await routeTotals();
  assert.deepEqual(after.map(([route]) => route), [id]);
  assert.equal(after[0][1]['2xx'], before.get(id)!['2xx'] + 1);

  // Back in the configuration, the route starts again from nothing.
  assert.ok(await gw.reload(config()));
  await send({ '/orders': [204] });
  assert.deepEqual(new Map(await routeTotals()).get('orders'), { '1xx': 0, '2xx': 1, '3xx': 0, '4xx': 0, '5xx': 0 });
});

test('on a node of two workers, a route\'s hour is the sum of both workers\' requests, whichever answers', async (t) => {
  const node = await spawnGateway({ ...config(), gateway: { worker_processes: 2, log_level: 'info' } });
  t.after(async () => {
    node.kill();
    await node.exited;
  });
  const requests = { '/orders': Array<number>(12).fill(200), '/unnamed': [404, 404, 500] };
  await send(requests, node.http);
  const servedBy = () => new Set(node.output().split('\n').filter((l) => l.includes('"type":"access"') && l.includes('/orders/')).map((l) => JSON.parse(l).pid));
  await waitFor(() => servedBy().size === 2, 'both workers to have served /orders');

  const answeredBy = new Set<number>();
  for (let i = 0; i < 100 && answeredBy.size < 2; i++) {
    const answer = await history(node.admin);
    answeredBy.add(answer.pid);
    assert.equal(answer.processes.length, 2);
    const [unnamed, orders] = answer.hour.routes;
    assert.equal(orders.route, 'orders');
    assert.deepEqual(totals(orders.requests), { '1xx': 0, '2xx': 12, '3xx': 0, '4xx': 0, '5xx': 0 });
    assert.deepEqual(totals(unnamed.requests), { '1xx': 0, '2xx': 0, '3xx': 0, '4xx': 2, '5xx': 1 });
  }
  assert.equal(answeredBy.size, 2, 'both workers answered');
});
