/**
 * Guessing passwords never locks their owners out (issue 28, item 3). Usernames are not secret, so a lock
 * per username let anyone deny its owner: eleven wrong passwords a minute, and the right one got 429 too.
 * Each client here is a loopback address of its own (127.0.0.x is all loopback on Linux), which the
 * gateway sees as the peer address. Runtime users (PBKDF2 hashes, checked on the worker pool):
 *
 * - ten failures from one address lock that address, for every username: an owner elsewhere, whose
 *   password no process has checked yet, gets in; an attacker rotating usernames locks itself;
 * - behind a trusted proxy the address is X-Real-IP, and an IPv6 /64 counts as one address;
 * - a guesser spread over many addresses: past a hundred failures of one user, the address the user
 *   verified from before still gets in at once, others are checked at a bounded rate (the right password
 *   gets through, guesses mostly get 429);
 * - the counts are the store's: a restart keeps them, and a node's two workers share them.
 */
import assert from 'node:assert/strict';
import { describe, it, test } from 'node:test';
import { aroundTests, request, spawnGateway, startGateway, startUpstream, tempDir, type Reply, type SpawnedGateway, type TestGateway } from '../../helpers/gateway.ts';
import { waitFor } from '../../helpers/support.ts';

/** The owners' address: owners never fail, so nothing is ever counted against it. */
const OWNER = '127.0.0.1';
/** A proxy the gateway trusts (its X-Real-IP is the client address). */
const PROXY = '127.0.0.9';
const MAX_FAILURES_PER_ADDRESS = 10;
const MAX_FAILURES_PER_USER = 100;
/** Waits for both workers to have answered allow for a loaded machine. */
const WORKERS_WINDOW_MS = 10_000;

function gatewayConfig(upstreamUrl: string, gateway: Record<string, unknown> = {}): Record<string, any> {
  return {
    gateway: { trusted_ips: [`${PROXY}/32`], ...gateway },
    services: [{ name: 'echo', url: upstreamUrl, routes: [{ name: 'protected', paths: ['/'], plugins: [{ name: 'basic-auth' }] }] }],
  };
}

interface Node {
  http: string;
  admin: string;
}

const fx = aroundTests(async () => {
  const upstream = await startUpstream();
  const gw = await startGateway(gatewayConfig(upstream.url));
  return {
    gw,
    async close() {
      await gw.stop();
      await upstream.close();
    },
  };
});

function basic(username: string, password: string): Record<string, string> {
  return { authorization: `Basic ${Buffer.from(`${username}:${password}`).toString('base64')}` };
}

async function createUser(node: Node, username: string, password: string): Promise<void> {
  const consumer = await request(`${node.admin}/consumers`, { method: 'POST', body: { username } });
  assert.equal(consumer.status, 201, consumer.text);
  const credential = await request(`${node.admin}/consumers/${username}/basic-auth`, { method: 'POST', body: { username, password } });
  assert.equal(credential.status, 201, credential.text);
}

function signIn(node: Node, from: string, username: string, password: string, headers: Record<string, string> = {}): Promise<Reply> {
  return request(`${node.http}/hello`, { headers: { ...basic(username, password), ...headers }, localAddress: from });
}

/** Statuses of `count` wrong passwords from `from`, sent one after the other, rotating through `usernames`. */
async function guesses(node: Node, from: string, usernames: string[], count: number): Promise<number[]> {
  const statuses: number[] = [];
  for (let i = 0; i < count; i++) statuses.push((await signIn(node, from, usernames[i % usernames.length], `guess-${i}`)).status);
  return statuses;
}

function assertLocked(reply: Reply): void {
  assert.equal(reply.status, 429, reply.text);
  const retryAfter = Number(reply.headers['retry-after']);
  assert.ok(retryAfter >= 1 && retryAfter <= 60, `Retry-After: ${reply.headers['retry-after']}`);
  assert.match(reply.headers['www-authenticate'] ?? '', /^Basic realm=/);
}

function assertSignedIn(reply: Reply): void {
  assert.equal(reply.status, 200, reply.text);
}

describe('guessing basic-auth passwords', () => {
  it('ten wrong passwords from one address lock that address, not the user: the owner gets in from its own', async () => {
    await createUser(fx.gw, 'alice', 'alice-password');
    await createUser(fx.gw, 'bob', 'bob-password');
    const attacker = '127.0.0.2';
    assert.deepEqual(await guesses(fx.gw, attacker, ['alice'], MAX_FAILURES_PER_ADDRESS), Array(MAX_FAILURES_PER_ADDRESS).fill(401));
    assertLocked(await signIn(fx.gw, attacker, 'alice', 'guess-x'));
    assertLocked(await signIn(fx.gw, attacker, 'bob', 'guess-x'));
    // No process has checked alice's password yet: it is checked now, and again it is her.
    for (let i = 0; i < 3; i++) assertSignedIn(await signIn(fx.gw, OWNER, 'alice', 'alice-password'));
    assertSignedIn(await signIn(fx.gw, OWNER, 'bob', 'bob-password'));
  });

  it('an attacker rotating through usernames locks its own address after ten failures in all; every owner gets in', async () => {
    const users = ['carol', 'dave', 'erin'];
    for (const user of users) await createUser(fx.gw, user, `${user}-password`);
    // Eleven guesses at each: under a lock per username, all three owners were locked out.
    const statuses = await guesses(fx.gw, '127.0.0.3', users, 11 * users.length);
    assert.deepEqual(statuses, [...Array(MAX_FAILURES_PER_ADDRESS).fill(401), ...Array(11 * users.length - MAX_FAILURES_PER_ADDRESS).fill(429)]);
    for (const user of users) assertSignedIn(await signIn(fx.gw, OWNER, user, `${user}-password`));
  });

  it('behind a trusted proxy the address is X-Real-IP, and the addresses of one IPv6 /64 count as one', async () => {
    await createUser(fx.gw, 'grace', 'grace-password');
    const viaProxy = (realIp: string, password: string) => signIn(fx.gw, PROXY, 'grace', password, { 'x-real-ip': realIp });
    for (let i = 1; i <= MAX_FAILURES_PER_ADDRESS; i++) assert.equal((await viaProxy(`2001:db8:0:1::${i}`, `guess-${i}`)).status, 401);
    assertLocked(await viaProxy('2001:db8:0:1:ffff:ffff:ffff:ffff', 'guess-x'));
    assertSignedIn(await viaProxy('2001:db8:0:2::1', 'grace-password'));
    // Another client behind the same proxy is not what was locked.
    assertSignedIn(await viaProxy('198.51.100.7', 'grace-password'));
  });

  it('a guesser spread over many addresses: past a hundred failures, the known address gets in, others are checked at a bounded rate', async () => {
    await createUser(fx.gw, 'frank', 'first-password');
    assertSignedIn(await signIn(fx.gw, OWNER, 'frank', 'first-password'));
    // A new password is a new credential, which no process remembers; the address frank verified from is still his.
    const changed = await request(`${fx.gw.admin}/consumers/frank/basic-auth/frank`, { method: 'PATCH', body: { password: 'second-password' } });
    assert.equal(changed.status, 200, changed.text);
    const addresses = MAX_FAILURES_PER_USER / MAX_FAILURES_PER_ADDRESS;
    for (let a = 1; a <= addresses; a++) {
      assert.deepEqual(await guesses(fx.gw, `127.0.1.${a}`, ['frank'], MAX_FAILURES_PER_ADDRESS), Array(MAX_FAILURES_PER_ADDRESS).fill(401), `address ${a}`);
    }
    assertSignedIn(await signIn(fx.gw, OWNER, 'frank', 'second-password'));
    // Fresh addresses at once: one check of frank's password per second goes ahead, the others are refused unchecked.
    const fresh = await Promise.all(Array.from({ length: 8 }, (_, i) => signIn(fx.gw, `127.0.2.${i + 1}`, 'frank', `spread-guess-${i}`)));
    const refused = fresh.filter((reply) => reply.status === 429);
    assert.ok(refused.length > 0, `statuses: ${fresh.map((reply) => reply.status)}`);
    for (const reply of refused) assert.match(reply.json().message, /of this credential/);
    // The right password from an address frank never used gets through at that rate.
    let reply = await signIn(fx.gw, '127.0.3.1', 'frank', 'second-password');
    for (let tries = 1; reply.status === 429 && tries < 20; tries++) {
      await new Promise((resolve) => setTimeout(resolve, 250));
      reply = await signIn(fx.gw, '127.0.3.1', 'frank', 'second-password');
    }
    assertSignedIn(reply);
  });
});

test('an address locked before a restart is still locked after it; the owner, unknown to the new process, gets in', async () => {
  const upstream = await startUpstream();
  const dataDir = tempDir();
  let gw: TestGateway | undefined = await startGateway(gatewayConfig(upstream.url), { dataDir });
  try {
    await createUser(gw, 'henry', 'henry-password');
    assert.deepEqual(await guesses(gw, '127.0.0.4', ['henry'], MAX_FAILURES_PER_ADDRESS), Array(MAX_FAILURES_PER_ADDRESS).fill(401));
    await gw.stop();
    gw = undefined;
    gw = await startGateway(gatewayConfig(upstream.url), { dataDir });
    assertLocked(await signIn(gw, '127.0.0.4', 'henry', 'guess-x'));
    assertSignedIn(await signIn(gw, OWNER, 'henry', 'henry-password'));
  } finally {
    await gw?.stop();
    await upstream.close();
  }
});

/** The last status each worker (by pid) answered to `clientIp`, from the access log. */
function statusesByWorker(node: SpawnedGateway, clientIp: string): Map<number, number> {
  const latest = new Map<number, number>();
  for (const line of node.output().split('\n')) {
    if (!line.includes('"type":"access"')) continue;
    const entry = JSON.parse(line);
    if (entry.client_ip === clientIp) latest.set(entry.pid, entry.status);
  }
  return latest;
}

test('on a node of two workers the counts are the node\'s: the address is locked on both, the owner gets in on both', async () => {
  const upstream = await startUpstream();
  // log_level info: spawnGateway learns the listeners from the log, and the access log names the worker.
  const node = await spawnGateway(gatewayConfig(upstream.url, { worker_processes: 2, log_level: 'info' }));
  try {
    await createUser(node, 'ida', 'ida-password');
    const attacker = '127.0.0.5';
    const statuses = await guesses(node, attacker, ['ida'], MAX_FAILURES_PER_ADDRESS + 4);
    assert.deepEqual(statuses, [...Array(MAX_FAILURES_PER_ADDRESS).fill(401), ...Array(4).fill(429)]);
    // Each request is a connection of its own, which either worker may take: ask until both answered.
    const bothAnswered = (clientIp: string, status: number, send: () => Promise<Reply>) => async () => {
      assert.equal((await send()).status, status);
      const latest = statusesByWorker(node, clientIp);
      return latest.size === 2 && [...latest.values()].every((s) => s === status);
    };
    await waitFor(bothAnswered(attacker, 429, () => signIn(node, attacker, 'ida', 'guess-x')), 'both workers to refuse the attacker', WORKERS_WINDOW_MS);
    await waitFor(bothAnswered(OWNER, 200, () => signIn(node, OWNER, 'ida', 'ida-password')), 'both workers to let the owner in', WORKERS_WINDOW_MS);
  } finally {
    node.kill('SIGTERM');
    await node.exited;
    await upstream.close();
  }
});
