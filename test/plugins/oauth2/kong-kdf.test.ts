/**
 * Kong's KDF cases (reference §7.16) seen from outside: client secrets hashed in Kong's PBKDF2 PHC format (so
 * hashes move between Kong and Tollgate), and INTERFACE §4's rule that codes and tokens are stored hashed.
 */
import assert from 'node:assert/strict';
import { pbkdf2Sync } from 'node:crypto';
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { ClassicLevel } from 'classic-level';
import { startGateway, startUpstream, TEST_DATABASE } from '../../helpers/gateway.ts';
import {
  GOOGLE,
  KONG_PHC,
  PROVISION_KEY,
  admin,
  assertOAuthError,
  assertTokenResponse,
  kongConfig,
  pkcePair,
  KongClient,
  verifyKongSecret,
} from './kong-fixture.ts';

/** Kong's 05-kdf_spec vector: hash("tofu", salt = "a litte bit, just a little bit"). */
const KONG_VECTOR = '$pbkdf2-sha512$i=10000,l=32$YSBsaXR0ZSBiaXQsIGp1c3QgYSBsaXR0bGUgYml0$z6ysNworexAhDELywIDi0ba0B0T7F/MBZ6Ige9lWRYI';

let upstream: Awaited<ReturnType<typeof startUpstream>>;
let gw: Awaited<ReturnType<typeof startGateway>>;
let client: KongClient;
let stopped = false;

function config() {
  const c = kongConfig(upstream.url);
  c.consumers.push({
    username: 'kong-import',
    oauth2_credentials: [
      // A secret hashed by Kong, imported as is.
      { name: 'imported', client_id: 'kong-hashed', client_secret: KONG_VECTOR, hash_secret: true, redirect_uris: [GOOGLE] },
      { name: 'twin-a', client_id: 'twin-a', client_secret: 'same-secret', hash_secret: true },
      { name: 'twin-b', client_id: 'twin-b', client_secret: 'same-secret', hash_secret: true },
    ],
  });
  return c;
}

before(async () => {
  upstream = await startUpstream();
  gw = await startGateway(config());
  client = new KongClient(gw);
});
after(async () => {
  if (!stopped) await gw?.stop();
  await upstream?.close();
});

const clientCredentials = (clientId: string, secret: string) =>
  client.token({ client_id: clientId, client_secret: secret, scope: 'email', grant_type: 'client_credentials' }, { host: 'oauth2_4.test' });

describe('Kong §7.16 KDF', () => {
  it('KD00 the PHC check of these tests reproduces Kong\'s vector', () => {
    assert.equal(verifyKongSecret('tofu', KONG_VECTOR), true);
    assert.equal(verifyKongSecret('bun', KONG_VECTOR), false);
  });

  it("KD01 a secret hashed by Kong authenticates at Tollgate's token endpoint", async () => {
    assertTokenResponse(await clientCredentials('kong-hashed', 'tofu'), { refresh: false });
    assertOAuthError(await clientCredentials('kong-hashed', 'bun'), 400, 'invalid_client', 'Invalid client authentication');
  });

  it('KD02 the same secret gets a random salt each time', async () => {
    const a = (await admin(gw, 'GET', '/oauth2/twin-a')).json().client_secret;
    const b = (await admin(gw, 'GET', '/oauth2/twin-b')).json().client_secret;
    assert.match(a, KONG_PHC);
    assert.match(b, KONG_PHC);
    assert.notEqual(a, b);
  });

  it("KD03 Tollgate's hashes verify with Kong's algorithm, for the right secret only", async () => {
    const stored = (await admin(gw, 'GET', '/oauth2/clientid123')).json().client_secret;
    assert.match(stored, KONG_PHC);
    assert.equal(verifyKongSecret('secret123', stored), true);
    assert.equal(verifyKongSecret('secret124', stored), false);
    assertTokenResponse(await clientCredentials('clientid123', 'secret123'), { refresh: false });
  });

  it("KD05 an older PBKDF2 hash (Kong's needs_rehash) is upgraded to the current parameters after a good secret", async () => {
    assert.equal((await admin(gw, 'POST', '/consumers', { username: 'legacy-dev' })).status, 201);
    const salt = Buffer.from('0123456789abcdef');
    const b64 = (b: Buffer) => b.toString('base64').replace(/=+$/, '');
    const legacy = `$pbkdf2-sha512$i=1000,l=32$${b64(salt)}$${b64(pbkdf2Sync('legacy-secret', salt, 1000, 32, 'sha512'))}`;
    const created = await admin(gw, 'POST', '/consumers/legacy-dev/oauth2', { name: 'legacy', client_id: 'legacy', client_secret: legacy, hash_secret: true });
    assert.equal(created.status, 201, created.text);
    assert.equal(created.json().client_secret, legacy, 'an imported hash is kept as it is');
    assertTokenResponse(await clientCredentials('legacy', 'legacy-secret'), { refresh: false });
    let stored = legacy;
    for (let tries = 0; tries < 50 && stored === legacy; tries++) {
      await new Promise((resolve) => setTimeout(resolve, 100));
      stored = (await admin(gw, 'GET', '/oauth2/legacy')).json().client_secret;
    }
    assert.match(stored, KONG_PHC);
    assert.equal(verifyKongSecret('legacy-secret', stored), true);
    assertTokenResponse(await clientCredentials('legacy', 'legacy-secret'), { refresh: false });
  });

  // The values are the store's, whichever adapter writes them; this reads them from the LevelDB files.
  it('KD04 codes, access tokens and refresh tokens are stored hashed', { skip: TEST_DATABASE === 'postgres' && 'reads the LevelDB files' }, async () => {
    const pendingCode = await client.provisionCode();
    const { verifier, challenge } = pkcePair();
    const codeGrant = await client.provisionToken({ clientId: 'clientid11211', secret: null, challenge, verifier });
    const implicit = await client.authorize({
      provision_key: PROVISION_KEY,
      authenticated_userid: 'id123',
      client_id: 'clientid123',
      scope: 'email',
      response_type: 'token',
    });
    const implicitToken = new URLSearchParams(new URL(implicit.json().redirect_uri).hash.slice(1)).get('access_token')!;
    const plainSecret = 'secret123';
    const publicClientId = (await admin(gw, 'GET', '/oauth2/clientid11211')).json().id as string;
    const secrets = [pendingCode, codeGrant.access_token, codeGrant.refresh_token, implicitToken, plainSecret, verifier];

    await gw.stop();
    stopped = true;
    const stored = await everythingStoredUnder(gw.dataDir);
    // Positive control: the scan does see the token rows (they name their credential).
    assert.ok(stored.entries > 0 && stored.text.includes(publicClientId), 'the scan reads the stored token rows');
    for (const secret of secrets) {
      assert.ok(!stored.text.includes(secret), `a plain secret is stored: ${secret.slice(0, 6)}…`);
      assert.ok(!stored.raw.includes(Buffer.from(secret)), `a plain secret is in the data files: ${secret.slice(0, 6)}…`);
    }
  });
});

/** Every live key and value of every LevelDB under `dir`, and the raw bytes of all its files (logs included). */
async function everythingStoredUnder(dir: string): Promise<{ entries: number; text: string; raw: Buffer }> {
  const files: string[] = [];
  const levelDirs: string[] = [];
  const walk = (d: string) => {
    for (const name of readdirSync(d)) {
      const path = join(d, name);
      if (statSync(path).isDirectory()) walk(path);
      else files.push(path);
    }
    if (existsSync(join(d, 'CURRENT'))) levelDirs.push(d);
  };
  walk(dir);
  // Raw bytes first: opening a database compacts its logs away.
  const raw = Buffer.concat(files.map((f) => readFileSync(f)));
  let entries = 0;
  const parts: string[] = [];
  for (const levelDir of levelDirs) {
    const db = new ClassicLevel<string, string>(levelDir);
    await db.open();
    for await (const [key, value] of db.iterator()) {
      entries += 1;
      parts.push(key, value);
    }
    await db.close();
  }
  return { entries, text: parts.join('\n'), raw };
}
