/**
 * Health checks: lua-resty-healthcheck's counting rules (what makes a target healthy or unhealthy,
 * what is ignored, thresholds of 0), and active probes against real TCP, HTTP and TLS servers.
 */
import assert from 'node:assert/strict';
import http from 'node:http';
import https from 'node:https';
import net, { type AddressInfo } from 'node:net';
import { after, before, describe, test } from 'node:test';
import { stringify } from 'yaml';
import { Balancer } from '../../../src/balancer/balancer.ts';
import { HealthChecker, usesHealthchecks } from '../../../src/balancer/health.ts';
import { probe } from '../../../src/balancer/probe.ts';
import { loadConfigText } from '../../../src/config/load.ts';
import type { ActiveHealthchecks, Upstream } from '../../../src/config/types.ts';
import { bundledPlugins } from '../../../src/plugins.ts';
import { testPki, type TestPki } from '../../fixtures/tls.ts';
import { closedPort, waitFor } from '../../helpers/support.ts';

function checkerOf(healthchecks: Record<string, unknown>, targets: string[] = ['10.0.0.1:80', '10.0.0.2:80']) {
  const text = stringify({ _format_version: '3.0', upstreams: [{ name: 'u', healthchecks, targets: targets.map((target) => ({ target })) }] });
  const loaded = loadConfigText(text, '/tmp/tollgate-health-test/gw.yaml', bundledPlugins);
  if (!loaded.ok) throw new Error(loaded.errors.map(String).join('\n'));
  const upstream: Upstream = loaded.config.upstreams[0];
  const balancer = new Balancer(upstream, loaded.config.targets);
  const changes: string[] = [];
  const checker = new HealthChecker(balancer, { hostHeader: (t) => t.host, credentials: {}, changed: (t, healthy) => changes.push(`${t.address} ${healthy ? 'up' : 'down'}`) });
  return { upstream, balancer, checker, target: balancer.targets[0], changes };
}

describe('counting (lua-resty-healthcheck)', () => {
  test('a failure count reaching its threshold takes the target out; fewer only make it "mostly healthy"', () => {
    const { checker, target, changes } = checkerOf({ passive: { unhealthy: { http_failures: 3 } } });
    checker.reportStatus(target, 500);
    checker.reportStatus(target, 503);
    assert.equal(target.available, true);
    assert.equal(checker.healthOf(target)!.state, 'mostly_healthy');
    checker.reportStatus(target, 500);
    assert.equal(target.available, false);
    assert.deepEqual(changes, ['10.0.0.1:80 down']);
  });

  test('a success clears the failure counts (when successes count at all)', () => {
    const { checker, target } = checkerOf({ passive: { healthy: { successes: 1 }, unhealthy: { http_failures: 2 } } });
    checker.reportStatus(target, 500);
    checker.reportStatus(target, 200);
    checker.reportStatus(target, 500);
    assert.equal(target.available, true, 'the 200 in between cleared the first failure');
    checker.reportStatus(target, 500);
    assert.equal(target.available, false);
    checker.reportStatus(target, 200);
    assert.equal(target.available, true, 'one success brings it back');
  });

  test('with healthy.successes 0 successes count for nothing: failures add up across them', () => {
    const { checker, target } = checkerOf({ passive: { unhealthy: { http_failures: 2 } } });
    checker.reportStatus(target, 500);
    checker.reportStatus(target, 200);
    checker.reportStatus(target, 500);
    assert.equal(target.available, false);
  });

  test('each kind of failure has its own threshold; 0 turns it off; unlisted statuses are ignored', () => {
    const { checker, target } = checkerOf({ passive: { unhealthy: { tcp_failures: 2, timeouts: 0, http_failures: 1, http_statuses: [500] } } });
    checker.reportTimeout(target);
    checker.reportTimeout(target);
    checker.reportStatus(target, 404);
    checker.reportStatus(target, 418);
    assert.equal(target.available, true);
    checker.reportTcpFailure(target);
    assert.equal(target.available, true);
    checker.reportTcpFailure(target);
    assert.equal(target.available, false);
  });

  test('a status set outright clears the counts', () => {
    const { checker, target } = checkerOf({ passive: { unhealthy: { http_failures: 2 } } });
    checker.reportStatus(target, 500);
    checker.setStatus(target, false);
    assert.equal(target.available, false);
    checker.setStatus(target, true);
    checker.reportStatus(target, 500);
    assert.equal(target.available, true, 'the failure before the reset no longer counts');
  });

  test("Kong's is_upstream_using_healthcheck", () => {
    assert.equal(usesHealthchecks(checkerOf({}).upstream), false);
    assert.equal(usesHealthchecks(checkerOf({ active: { healthy: { interval: 5 } } }).upstream), true);
    assert.equal(usesHealthchecks(checkerOf({ passive: { unhealthy: { timeouts: 1 } } }).upstream), true);
    assert.equal(usesHealthchecks(checkerOf({ passive: { healthy: { successes: 1 } } }).upstream), false);
  });

  test('the health of the previous configuration is kept for the same target', () => {
    const first = checkerOf({ passive: { unhealthy: { http_failures: 1 } } });
    first.checker.reportStatus(first.target, 500);
    const { balancer } = checkerOf({ passive: { unhealthy: { http_failures: 1 } } });
    const kept = new HealthChecker(balancer, { hostHeader: (t) => t.host, credentials: {} }, (t) => first.checker.healthOf(first.balancer.find(t.address)!));
    assert.deepEqual(balancer.targets.map((t) => [t.address, t.available]), [['10.0.0.1:80', false], ['10.0.0.2:80', true]]);
    assert.equal(kept.healthOf(balancer.targets[0])!.state, 'unhealthy');
  });
});

describe('active probes', () => {
  let pki: TestPki;
  const servers: net.Server[] = [];
  let seen: http.IncomingHttpHeaders[] = [];
  let status = 200;
  let httpPort: number;
  let silentPort: number;
  let garbagePort: number;
  let tlsPort: number;
  let mtlsPort: number;

  const listen = async (server: net.Server) => {
    servers.push(server);
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    return (server.address() as AddressInfo).port;
  };
  const handler: http.RequestListener = (req, res) => {
    seen.push({ ...req.headers, ':path': req.url });
    res.writeHead(status).end();
  };

  before(async () => {
    pki = await testPki();
    httpPort = await listen(http.createServer(handler));
    silentPort = await listen(net.createServer(() => {}));
    garbagePort = await listen(net.createServer((s) => s.end('SSH-2.0-OpenSSH\r\n')));
    tlsPort = await listen(https.createServer({ cert: pki.server.cert, key: pki.server.key }, handler));
    mtlsPort = await listen(
      https.createServer(
        {
          cert: pki.server.cert,
          key: pki.server.key,
          ca: [pki.root.cert],
          requestCert: true,
          rejectUnauthorized: true,
        },
        handler,
      ),
    );
  });
  after(() => {
    for (const s of servers) {
      (s as http.Server).closeAllConnections?.();
      s.close();
    }
  });

  const checks = (fields: Partial<ActiveHealthchecks> = {}): ActiveHealthchecks => ({
    type: 'http', timeout: 1, concurrency: 10, http_path: '/status', https_sni: null, https_verify_certificate: true, headers: null,
    healthy: { interval: 0, http_statuses: [200, 302], successes: 1 },
    unhealthy: { interval: 0, http_statuses: [500], tcp_failures: 1, timeouts: 1, http_failures: 1 },
    ...fields,
  });
  const at = (port: number, hostHeader = 'backend.test') => ({ host: '127.0.0.1', port, hostHeader });

  test('http: GET http_path with the Host and configured headers; the status line decides', async () => {
    seen = [];
    status = 503;
    assert.deepEqual(await probe(at(httpPort), checks({ headers: { 'x-probe': ['a', 'b'] } })), { kind: 'status', status: 503 });
    assert.equal(seen[0][':path'], '/status');
    assert.equal(seen[0].host, 'backend.test');
    assert.equal(seen[0].connection, 'close');
    assert.equal(seen[0]['x-probe'], 'a, b');
    status = 200;
  });

  test('tcp: a connection is a success; a refused one a TCP failure', async () => {
    assert.deepEqual(await probe(at(httpPort), checks({ type: 'tcp' })), { kind: 'success' });
    assert.equal((await probe(at(await closedPort()), checks({ type: 'tcp' }))).kind, 'tcp_failure');
  });

  test('a server that never answers is a timeout; one that answers garbage is status 0', async () => {
    assert.deepEqual(await probe(at(silentPort), checks({ timeout: 0.1 })), { kind: 'timeout' });
    assert.deepEqual(await probe(at(garbagePort), checks()), { kind: 'status', status: 0 });
  });

  test('https: verified against the system CAs unless https_verify_certificate is off; the SNI is https_sni or the host', async () => {
    assert.equal((await probe(at(tlsPort, 'localhost'), checks({ type: 'https' }))).kind, 'tcp_failure', 'the test CA is not trusted');
    assert.deepEqual(await probe(at(tlsPort, 'localhost'), checks({ type: 'https', https_verify_certificate: false })), { kind: 'status', status: 200 });
  });

  test("https with the upstream's client certificate (mTLS)", async () => {
    assert.equal((await probe(at(mtlsPort), checks({ type: 'https', https_verify_certificate: false }))).kind, 'tcp_failure');
    const outcome = await probe(at(mtlsPort), checks({ type: 'https', https_verify_certificate: false }), { cert: pki.client.cert, key: pki.client.key });
    assert.deepEqual(outcome, { kind: 'status', status: 200 });
  });

  test('a checker probes on its intervals: a 500 takes a target out, a 200 brings it back', async () => {
    const { balancer, checker, target } = checkerOf(
      { active: { http_path: '/status', healthy: { interval: 0.05, successes: 1 }, unhealthy: { interval: 0.05, http_failures: 1 } } },
      [`127.0.0.1:${httpPort}`],
    );
    checker.start();
    try {
      status = 500;
      await waitFor(() => !target.available, 'the probe to take the target out');
      assert.equal(balancer.healthy, false);
      status = 200;
      await waitFor(() => target.available, 'the probe to bring the target back');
    } finally {
      checker.stop();
      status = 200;
    }
  });
});
