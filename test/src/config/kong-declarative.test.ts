/**
 * Kong's declarative details (issue 30), through the real `tollgate` command: a file in the shape of
 * `kong config db_export` with every credential kind (fixture test/fixtures/kong-db-export-credentials.yaml)
 * loads, its timestamps and a key's ttl show in the admin API, a jwt plugin with `claims_to_verify: null` and a
 * maximum expiration is accepted, decK's metadata keys are ignored with a warning, and `{vault://…}`
 * references of a certificate are read from the environment, an unset variable being an error at its field;
 * the `vaults` entity shows at `/vaults`.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { X509Certificate } from 'node:crypto';
import { resolve } from 'node:path';
import tls from 'node:tls';
import { after, before, test } from 'node:test';
import { parse } from 'yaml';
import { request, runTollgate, spawnGateway, startGateway, tempDir, writeConfig, type SpawnedGateway } from '../../helpers/gateway.ts';
import { testPki } from '../../fixtures/tls.ts';
import { kongPasswordHash } from '../../../plugins/basic-auth/schema.ts';
import { portOf } from '../../helpers/support.ts';

const CONSUMER_ID = '6a7d1c3e-1f2b-4c5d-9e8f-0a1b2c3d4e03';
let pki: Awaited<ReturnType<typeof testPki>>;
let gw: SpawnedGateway;

/** The fixture with its certificate key read from the environment variable `keyVariable`. */
function exportFile(keyVariable: string): Record<string, any> {
  const text = readFileSync(resolve(import.meta.dirname, '../../fixtures/kong-db-export-credentials.yaml'), 'utf8')
    .replace('{{KEY_VARIABLE}}', keyVariable)
    .replace('{{BASIC_PASSWORD_HASH}}', kongPasswordHash(CONSUMER_ID, 'basic-secret'));
  return parse(text);
}

before(async () => {
  pki = await testPki();
  // Children inherit the environment: the vault `tls-env` reads TOLLGATE_TEST_CERT, `env` the key.
  process.env.TOLLGATE_TEST_CERT = pki.server.cert;
  process.env.TOLLGATE_TEST_DECLARATIVE_KEY = pki.server.key;
  gw = await spawnGateway(exportFile('tollgate_test_declarative_key'));
});
after(() => gw?.kill('SIGKILL'));

test('tollgate check: the export loads, each decK metadata key warned about', async () => {
  const file = writeConfig(exportFile('tollgate_test_declarative_key'), tempDir());
  const run = await runTollgate(['check', '--config', file]);
  assert.equal(run.code, 0, run.output);
  for (const key of ['_info', '_konnect', '_workspace']) assert.match(run.output, new RegExp(`${key}: decK's metadata: ignored`));
});

test("tollgate check: an unset variable of a reference is an error naming the field", async () => {
  const file = writeConfig(exportFile('tollgate_test_unset_variable'), tempDir());
  const run = await runTollgate(['check', '--config', file]);
  assert.equal(run.code, 1, run.output);
  assert.match(run.output, /certificates\[0\]\.key: cannot resolve \{vault:\/\/env\/tollgate_test_unset_variable\}: environment variable TOLLGATE_TEST_UNSET_VARIABLE is not set/);
});

test('the admin API shows the timestamps of the file, and the remaining ttl of the key', async () => {
  const consumer = (await request(`${gw.admin}/consumers/acme`)).json();
  assert.deepEqual([consumer.created_at, consumer.updated_at], [1714060103, 1714060104]);
  const key = (await request(`${gw.admin}/consumers/acme/key-auth`)).json().data[0];
  assert.equal(key.created_at, 1714060105);
  assert.ok(key.ttl > 3500 && key.ttl <= 3600, `ttl ${key.ttl}`);
  const expected: [string, number][] = [['basic-auth', 1714060106], ['jwt', 1714060107], ['acls', 1714060108], ['oauth2', 1714060109], ['hmac-auth', 1714060111]];
  for (const [path, createdAt] of expected) {
    const { data } = (await request(`${gw.admin}/consumers/acme/${path}`)).json();
    assert.deepEqual(data.map((c: { created_at: number }) => c.created_at), [createdAt], path);
  }
});

test('GET /vaults and /vaults/{prefix}: the vaults entity as Kong shows it; the certificate and SNI with their timestamps', async () => {
  const { data } = (await request(`${gw.admin}/vaults`)).json();
  const expected = {
    id: '0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c01', name: 'env', prefix: 'tls-env', description: 'certificates from the environment',
    config: { prefix: 'TOLLGATE_TEST_' }, tags: null, created_at: 1714060100, updated_at: 1714060100,
  };
  assert.deepEqual(data, [expected]);
  assert.deepEqual((await request(`${gw.admin}/vaults/tls-env`)).json(), expected);
  assert.equal((await request(`${gw.admin}/vaults/nope`)).status, 404);
  const certificate = (await request(`${gw.admin}/certificates`)).json().data[0];
  assert.deepEqual([certificate.created_at, certificate.updated_at], [1714060101, 1714060101]);
  const sni = (await request(`${gw.admin}/snis/orders.example.com`)).json();
  assert.deepEqual([sni.created_at, sni.updated_at], [1714060102, 1714060102]);
});

test("a plugin's referenceable field (rate-limiting's redis.password) is read from the vault, the admin API showing the reference", async () => {
  process.env.TOLLGATE_TEST_REDIS_PASSWORD = 'redis-secret';
  const limits = (password: string) => ({ plugins: [{ name: 'rate-limiting', config: { minute: 100, redis: { password } } }] });
  const node = await startGateway(limits('{vault://env/tollgate_test_redis_password}'));
  try {
    const { config } = (await request(`${node.admin}/plugins`)).json().data[0];
    assert.deepEqual([config.redis.password, config.redis.port, config.policy], ['{vault://env/tollgate_test_redis_password}', 6379, 'local']);
  } finally {
    await node.stop();
  }
  const run = await runTollgate(['check', '--config', writeConfig(limits('{vault://env/tollgate_test_unset_redis}'), tempDir())]);
  assert.equal(run.code, 1, run.output);
  assert.match(run.output, /plugins\[0\]\.config\.redis\.password: cannot resolve \{vault:\/\/env\/tollgate_test_unset_redis\}: environment variable TOLLGATE_TEST_UNSET_REDIS is not set/);
});

test('the certificate read through the vaults is served', async () => {
  const issuer = await new Promise<string>((resolvePeer, reject) => {
    const socket = tls.connect({ host: '127.0.0.1', port: portOf(gw.https), servername: 'orders.example.com', rejectUnauthorized: false }, () => {
      resolvePeer(new X509Certificate(socket.getPeerX509Certificate()!.raw).issuer);
      socket.destroy();
    });
    socket.once('error', reject);
  });
  assert.match(issuer, /Tollgate Test Root CA/);
});
