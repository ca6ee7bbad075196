/**
 * The oauth2 plugin's building blocks on real components: Kong's PBKDF2 vector, the key derivation pool
 * (bounded queue, an urgent lane served first, threads of lower priority), the config schema's Kong
 * messages, redirect URI composition, and the token store on a real LevelDB — including that a warm
 * token, a flood of bad tokens and concurrent misses cost (almost) no store reads.
 */
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { getPriority } from 'node:os';
import { after, before, describe, it } from 'node:test';
import oauth2 from '../../../plugins/oauth2/index.ts';
import { composeRedirectUri, luaEscape } from '../../../plugins/oauth2/redirect.ts';
import type { RequestLimitError } from '../../../src/pdk/index.ts';
import { KdfPool } from '../../../src/toolkit/kdf-pool.ts';
import { hashSecret, hashSecretAsync, needsRehash, verifySecret, verifySecretAsync } from '../../../src/toolkit/secrets.ts';
import { TokenStore, type IssueRequest, type TokenRow } from '../../../plugins/oauth2/tokens.ts';
import { validate } from '../../../src/pdk/index.ts';
import { LevelStore } from '../../../src/store/level.ts';
import type { BatchOp, Expectation, PutOptions, ScanOptions, Store, WriteOptions } from '../../../src/store/store.ts';
import { tempDir } from '../../helpers/gateway.ts';

const KONG_VECTOR = '$pbkdf2-sha512$i=10000,l=32$YSBsaXR0ZSBiaXQsIGp1c3QgYSBsaXR0bGUgYml0$z6ysNworexAhDELywIDi0ba0B0T7F/MBZ6Ige9lWRYI';
/** The derivation of KONG_VECTOR. */
const KONG_JOB = { secret: 'tofu', salt: Buffer.from('a litte bit, just a little bit'), iterations: 10_000, keyLength: 32, digest: 'sha512' };

describe("Kong's PBKDF2 client-secret hashes", () => {
  const pool = new KdfPool();
  const derive = pool.derive.bind(pool);
  after(() => pool.close());

  it('reproduces the test vector of 05-kdf_spec', () => {
    assert.equal(hashSecret('tofu', Buffer.from('a litte bit, just a little bit')), KONG_VECTOR);
  });

  it('verifies, on the event loop and on the worker pool, only the right secret; random salts by default', async () => {
    assert.equal(verifySecret('tofu', KONG_VECTOR), true);
    assert.equal(await verifySecretAsync('tofu', KONG_VECTOR, derive), true);
    assert.equal(await verifySecretAsync('bun', KONG_VECTOR, derive), false);
    assert.notEqual(hashSecret('tofu'), hashSecret('tofu'));
    assert.equal(verifySecret('tofu', hashSecret('tofu')), true);
    assert.equal(verifySecret('tofu', await hashSecretAsync('tofu', derive)), true);
    assert.equal(needsRehash(KONG_VECTOR), false);
    assert.equal(needsRehash('$pbkdf2-sha256$i=1000,l=32$YWJj$YWJj'), true);
  });

  it('refuses malformed or hostile hashes without throwing', async () => {
    assert.equal(await verifySecretAsync('x', 'plain-text', derive), false);
    assert.equal(await verifySecretAsync('x', '$pbkdf2-sha512$i=999999999,l=32$YWJj$YWJj', derive), false);
  });

  it('the worker pool refuses derivations past its queue at once, and serves again once it drains', async () => {
    const small = new KdfPool(1, 2);
    try {
      const accepted = [small.derive(KONG_JOB), small.derive(KONG_JOB), small.derive(KONG_JOB)];
      await assert.rejects(small.derive(KONG_JOB), (err: RequestLimitError) => err.code === 'TOLLGATE_ERR_HASHING_BUSY' && err.status === 503);
      const keys = await Promise.all(accepted);
      assert.ok(keys.every((key) => KONG_VECTOR.endsWith(key.toString('base64').replace(/=+$/, ''))));
      assert.ok(KONG_VECTOR.endsWith((await small.derive(KONG_JOB)).toString('base64').replace(/=+$/, '')));
    } finally {
      await small.close();
    }
  });

  it('an urgent derivation (an owner\'s, most likely) goes before the queued ones, even when their queue is full', async () => {
    const small = new KdfPool(1, 2);
    try {
      const finished: string[] = [];
      const derived = (name: string, urgent = false) => small.derive(KONG_JOB, urgent).then(() => void finished.push(name));
      const waiting = [derived('running'), derived('queued 1'), derived('queued 2')];
      await assert.rejects(small.derive(KONG_JOB), (err: RequestLimitError) => err.code === 'TOLLGATE_ERR_HASHING_BUSY');
      await Promise.all([...waiting, derived('urgent', true)]);
      assert.deepEqual(finished, ['running', 'urgent', 'queued 1', 'queued 2']);
    } finally {
      await small.close();
    }
  });

  it('derives on threads ten steps nicer than the process, so a flood of guesses yields the CPU to the event loop', { skip: process.platform !== 'linux' && 'Linux only' }, async () => {
    const small = new KdfPool(1, 1);
    try {
      await small.derive(KONG_JOB);
      const threadNiceness = readdirSync('/proc/self/task').map((thread) => Number(readFileSync(`/proc/self/task/${thread}/stat`, 'utf8').split(') ')[1].split(' ')[16]));
      assert.ok(threadNiceness.includes(Math.min(19, getPriority() + 10)), `niceness of the threads: ${threadNiceness}`);
    } finally {
      await small.close();
    }
  });
});

describe('config schema', () => {
  const check = (config: Record<string, unknown>) => validate(oauth2.configSchema, config);

  it('needs one grant enabled, with Kong message', () => {
    assert.deepEqual(check({}).issues, [
      { path: [], message: 'at least one of these fields must be true: enable_authorization_code, enable_implicit_grant, enable_client_credentials, enable_password_grant' },
    ]);
  });

  it('mandatory_scope needs scopes; refresh_token_ttl is bounded; unknown fields refused', () => {
    assert.deepEqual(check({ enable_authorization_code: true, mandatory_scope: true }).issues, [{ path: ['scopes'], message: 'required field missing' }]);
    assert.deepEqual(check({ enable_authorization_code: true, refresh_token_ttl: 252979200 }).issues, [
      { path: ['refresh_token_ttl'], message: 'value should be between 0 and 100000000' },
    ]);
    assert.deepEqual(check({ enable_authorization_code: true, persistent_refresh_token: true }).issues, [
      { path: ['persistent_refresh_token'], message: 'unknown field' },
    ]);
    assert.deepEqual(check({ enable_authorization_code: true, pkce: 'plain' }).issues, [{ path: ['pkce'], message: 'expected one of: none, lax, strict' }]);
    assert.deepEqual(check({ enable_authorization_code: true, auth_header_name: null }).issues, [{ path: ['auth_header_name'], message: 'required field missing' }]);
  });

  it("fills Kong's defaults and generates a provision_key", () => {
    const { value, issues } = check({ enable_client_credentials: true });
    assert.deepEqual(issues, []);
    assert.equal(value.token_expiration, 7200);
    assert.equal(value.refresh_token_ttl, 1209600);
    assert.equal(value.auth_header_name, 'authorization');
    assert.equal(value.pkce, 'lax');
    assert.equal(value.reuse_refresh_token, false);
    assert.match(value.provision_key, /^[A-Za-z0-9]{32}$/);
    assert.equal(check({ enable_client_credentials: true, provision_key: 'hello' }).value.provision_key, 'hello');
  });

  it('credential entity: redirect URIs checked per element, defaults generated', () => {
    const schema = oauth2.entities![0].schema;
    const bad = validate(schema, { name: 'x', redirect_uris: ['http://ok.test', 'not-valid', 'http://t.test/#frag'] });
    assert.deepEqual(bad.issues, [
      { path: ['redirect_uris', 1], message: "cannot parse 'not-valid'" },
      { path: ['redirect_uris', 2], message: "fragment not allowed in 'http://t.test/#frag'" },
    ]);
    const good = validate(schema, { name: 'x' });
    assert.match(good.value.client_id, /^[A-Za-z0-9]{32}$/);
    assert.match(good.value.client_secret, /^[A-Za-z0-9]{32}$/);
    const hashed = oauth2.entities![0].transform!({ ...good.value, hash_secret: true });
    assert.equal(verifySecret(good.value.client_secret, hashed.client_secret), true);
    assert.equal(oauth2.entities![0].transform!({ ...good.value, client_secret: KONG_VECTOR, hash_secret: true }).client_secret, KONG_VECTOR);
  });
});

describe('redirect URI composition (LuaSocket escaping, sorted keys)', () => {
  it('escapes every byte outside [A-Za-z0-9_] with lower-case hex', () => {
    assert.equal(luaEscape('a-b.c d,"é'), 'a%2db%2ec%20d%2c%22%c3%a9');
  });

  it("merges the registered URI's query, ours winning, keys sorted", () => {
    assert.equal(composeRedirectUri('http://google.test/kong?foo=bar&code=123', { code: 'abc' }, false), 'http://google.test/kong?code=abc&foo=bar');
    assert.equal(
      composeRedirectUri('http://google.test/kong', { error: 'invalid_scope', error_description: 'You must specify a scope' }, false),
      'http://google.test/kong?error=invalid_scope&error_description=You%20must%20specify%20a%20scope',
    );
    assert.equal(
      composeRedirectUri('http://google.test/kong?x=1', { access_token: 't', token_type: 'bearer', expires_in: 5, state: 'wot' }, true),
      'http://google.test/kong?x=1#access_token=t&expires_in=5&state=wot&token_type=bearer',
    );
  });
});

/** A real LevelDB store that counts reads, to see what the token cache saves. */
class CountingStore implements Store {
  reads = 0;
  constructor(private readonly inner: Store) {}
  get(key: string) {
    this.reads++;
    return this.inner.get(key);
  }
  getMany(keys: string[]) {
    this.reads += keys.length;
    return this.inner.getMany(keys);
  }
  put(key: string, value: string, options?: PutOptions & WriteOptions) {
    return this.inner.put(key, value, options);
  }
  del(key: string, options?: WriteOptions) {
    return this.inner.del(key, options);
  }
  batch(ops: BatchOp[], options?: WriteOptions) {
    return this.inner.batch(ops, options);
  }
  writeBatch() {
    return this.inner.writeBatch();
  }
  commitIf(expectations: Expectation[], ops: BatchOp[], options?: WriteOptions) {
    return this.inner.commitIf(expectations, ops, options);
  }
  get notices() {
    return this.inner.notices;
  }
  scan(options: ScanOptions) {
    return this.inner.scan(options);
  }
  namespace(name: string): Store {
    return new CountingStore(this.inner.namespace(name));
  }
  journal() {
    return this.inner.journal();
  }
  nearData(procedure: string, args: unknown[]) {
    return this.inner.nearData(procedure, args);
  }
}

/** Reads the real store at once but answers only when released: a read a concurrent write overtakes. */
class LateAnswers extends CountingStore {
  private released: Promise<void> = Promise.resolve();
  release = () => {};

  hold(): void {
    this.released = new Promise((resolve) => (this.release = resolve));
  }

  override get(key: string) {
    const value = super.get(key);
    const released = this.released;
    return released.then(() => value);
  }
}

describe('token store on LevelDB', () => {
  let level: LevelStore;
  let store: CountingStore;
  const request: IssueRequest = {
    credential: 'cred-1',
    binding: 'service:s1',
    scope: 'read',
    authenticatedUserid: 'u1',
    expiresIn: 60,
    withRefreshToken: true,
    refreshTokenTtl: 3600,
  };

  before(async () => {
    level = new LevelStore(tempDir());
    await level.open();
    store = new CountingStore(level.namespace('oauth2'));
  });
  after(() => level.close());

  it('stores only digests: no token value appears in any key or value', async () => {
    const tokens = new TokenStore(store);
    const issued = await tokens.issue(request);
    const code = await tokens.saveCode({ credential: 'c', binding: null, plugin: 'p', authenticated_userid: 'u', scope: null, challenge: null, challenge_method: null, redirect_uri: 'https://x.test/cb' });
    for await (const [key, value] of level.scan({})) {
      for (const secret of [issued.accessToken, issued.refreshToken!, code]) {
        assert.ok(!key.includes(secret) && !value.includes(secret), `plain value stored under ${key}`);
      }
    }
    assert.match(issued.accessToken, /^[A-Za-z0-9]{43}$/);
  });

  it('a warm valid token and a repeated bad token cost no store reads', async () => {
    const tokens = new TokenStore(store);
    const issued = await tokens.issue(request);
    const cold = new TokenStore(store);
    store.reads = 0;
    assert.equal((await cold.findByAccessToken(issued.accessToken))?.id, issued.row.id);
    assert.equal(store.reads, 1);
    for (let i = 0; i < 1000; i++) await cold.findByAccessToken(issued.accessToken);
    for (let i = 0; i < 1000; i++) assert.equal(await cold.findByAccessToken('bad-token'), undefined);
    assert.equal(store.reads, 2);
  });

  it('concurrent misses on one token share one store read', async () => {
    const issued = await new TokenStore(store).issue(request);
    const cold = new TokenStore(store);
    store.reads = 0;
    const rows = await Promise.all(Array.from({ length: 50 }, () => cold.findByAccessToken(issued.accessToken)));
    assert.ok(rows.every((row) => row?.id === issued.row.id));
    assert.equal(store.reads, 1);
  });

  it('revocation and renewal invalidate the cache; refresh tokens find their row', async () => {
    const tokens = new TokenStore(store);
    const issued = await tokens.issue(request);
    assert.ok(await tokens.findByAccessToken(issued.accessToken));
    const row = await tokens.findByRefreshToken(issued.refreshToken!);
    assert.equal(row?.id, issued.row.id);
    const renewed = (await tokens.renewAccessToken(row!, 60, 3600))!;
    assert.equal(await tokens.findByAccessToken(issued.accessToken), undefined);
    assert.equal((await tokens.findByAccessToken(renewed.accessToken))?.id, issued.row.id);
    assert.equal((await tokens.findByRefreshToken(issued.refreshToken!))?.id, issued.row.id);
    await tokens.revoke(renewed.row);
    assert.equal(await tokens.findByAccessToken(renewed.accessToken), undefined);
    assert.equal(await tokens.findByRefreshToken(issued.refreshToken!), undefined);
    assert.equal(await new TokenStore(store).findById(issued.row.id), undefined);
  });

  it('a refresh token is redeemed at most once under concurrency, renewed or exchanged, whichever store instance redeems it', async () => {
    for (const redeem of [
      (tokens: TokenStore, row: TokenRow) => tokens.renewAccessToken(row, 60, 3600),
      (tokens: TokenStore, row: TokenRow) => tokens.exchange(row, request),
    ]) {
      const issued = await new TokenStore(store).issue(request);
      const instances = Array.from({ length: 5 }, () => new TokenStore(store));
      const rows = await Promise.all(instances.map((tokens) => tokens.findByRefreshToken(issued.refreshToken!)));
      const results = await Promise.all(instances.map((tokens, i) => redeem(tokens, rows[i]!)));
      assert.equal(results.filter(Boolean).length, 1);
      for (const tokens of instances) tokens.close();
    }
  });

  it('a lookup that a change of its token overtook is not cached: the token created meanwhile is found next time', async () => {
    const late = new LateAnswers(store);
    const reader = new TokenStore(late);
    const chosen = 'chosen-while-looked-up';
    late.hold();
    const lookup = reader.findByAccessToken(chosen);
    await new TokenStore(store).issue({ ...request, accessToken: chosen });
    late.release();
    assert.equal(await lookup, undefined, 'the read was made before the token existed');
    assert.ok(await reader.findByAccessToken(chosen), 'and its answer was not kept');
  });

  it('a change made through one token store reaches the cache of another on the same store', async () => {
    const [writer, reader] = [new TokenStore(store), new TokenStore(store)];
    const issued = await writer.issue(request);
    assert.ok(await reader.findByAccessToken(issued.accessToken));
    await writer.revoke(issued.row);
    assert.equal(await reader.findByAccessToken(issued.accessToken), undefined);
  });

  it('rows without a refresh token expire with their access token; with one, after refresh_token_ttl', async () => {
    const tokens = new TokenStore(store);
    const now = Date.now();
    const plain = await tokens.issue({ ...request, withRefreshToken: false });
    assert.ok(Math.abs(plain.row.row_expires_at! - (now + 60_000)) < 1000);
    const refreshable = await tokens.issue(request);
    assert.ok(Math.abs(refreshable.row.row_expires_at! - (now + 3_600_000)) < 1000);
    const forever = await tokens.issue({ ...request, expiresIn: 0 });
    assert.equal(forever.row.row_expires_at, null);
    assert.equal(forever.refreshToken, null);
  });
});
