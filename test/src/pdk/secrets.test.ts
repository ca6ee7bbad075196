/** Secrets as the PDK makes and checks them: random values, declared secrets' hashes, digests, constant-time equality. */
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { test } from 'node:test';
import { alphanumericFrom, hashDeclaredSecret, isHashedSecret, randomAlphanumeric, randomToken, safeEqual, SecretVerifier, tokenDigest } from '../../../src/pdk/index.ts';
import { LevelStore } from '../../../src/store/level.ts';
import { tempDir } from '../../helpers/gateway.ts';

test('random values are alphanumeric, of the length asked; bytes from 248 up are skipped, not folded', () => {
  assert.match(randomAlphanumeric(), /^[A-Za-z0-9]{32}$/);
  assert.match(randomToken(), /^[A-Za-z0-9]{43}$/);
  assert.equal(alphanumericFrom(Uint8Array.from([0, 248, 255, 61, 62]), 3), 'A9A');
});

test('a declared secret hashes the same for the same scope on this node, and differently for another scope', () => {
  const hash = hashDeclaredSecret('s3cret', 'basic-auth:alice');
  assert.ok(isHashedSecret(hash));
  assert.equal(hashDeclaredSecret('s3cret', 'basic-auth:alice'), hash);
  assert.notEqual(hashDeclaredSecret('s3cret', 'basic-auth:bob'), hash);
  assert.equal(isHashedSecret('s3cret'), false);
});

test('the verifier accepts the secret of a hash and refuses another', async () => {
  const store = new LevelStore(join(tempDir(), 'store'));
  const verifier = new SecretVerifier(store);
  try {
    const hash = hashDeclaredSecret('s3cret', 'test');
    assert.equal(await verifier.verify({ id: 'c1' }, hash, 's3cret', '127.0.0.1'), true);
    assert.equal(await verifier.verify({ id: 'c1' }, hash, 'guess', '127.0.0.1'), false);
  } finally {
    await verifier.close();
    await store.close();
  }
});

test('digests are stable and never the value; equality is by value whatever the lengths', () => {
  assert.equal(tokenDigest('token'), tokenDigest('token'));
  assert.notEqual(tokenDigest('token'), 'token');
  assert.equal(safeEqual('abc', 'abc'), true);
  assert.equal(safeEqual('abc', 'abcd'), false);
});
