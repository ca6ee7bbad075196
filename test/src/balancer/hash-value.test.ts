/**
 * What consistent hashing hashes a request on: Kong's cases from
 * spec/02-integration/05-proxy/10-balancer/03-consistent-hashing_spec.lua (the value its test
 * upstream echoed in x-balancer-hash-value; "NONE" there is the empty value here).
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { stringify } from 'yaml';
import { hashValue, type HashRequest } from '../../../src/balancer/hash-value.ts';
import { loadConfigText } from '../../../src/config/load.ts';
import type { Upstream } from '../../../src/config/types.ts';
import { bundledPlugins } from '../../../src/plugins.ts';
import { normalizePath } from '../../../src/router/index.ts';

function upstream(fields: Record<string, unknown>): Upstream {
  const loaded = loadConfigText(stringify({ _format_version: '3.0', upstreams: [{ name: 'u', ...fields }] }), '/tmp/tollgate-hash-test/gw.yaml', bundledPlugins);
  if (!loaded.ok) throw new Error(loaded.errors.map(String).join('\n'));
  return loaded.config.upstreams[0];
}

/** A request to `uri` as the router would see it (normalized path, raw query), routed by `/(?<namespace>[^/]+)/(?<id>\d+)`. */
function request(uri: string, extra: Partial<HashRequest> = {}): HashRequest {
  const [path, rawQuery = ''] = uri.split(/\?(.*)/s);
  const normalized = normalizePath(path)!;
  const m = /^\/(?<namespace>[^/]+)\/(?<id>[0-9]+)/.exec(normalized);
  return { consumer: null, credential: null, clientIp: '10.1.2.3', headers: {}, path: normalized, rawQuery, match: { captures: m ? { ...m.groups } : undefined }, ...extra };
}

const valueFor = (uri: string, fields: Record<string, unknown>) => hashValue(upstream(fields), request(uri)).value;

describe('headers', () => {
  test('hashing on header, several values, Hyphenated-Pascal-Case names, missing header', () => {
    const u = upstream({ hash_on: 'header', hash_on_header: 'hashme' });
    assert.equal(hashValue(u, request('/', { headers: { hashme: 'just a value' } })).value, 'just a value');
    assert.equal(hashValue(u, request('/', { headers: { hashme: ['1st value', '2nd value'] } })).value, '1st value, 2nd value');
    const pascal = upstream({ hash_on: 'header', hash_on_header: 'X-LB-Hash' });
    assert.equal(hashValue(pascal, request('/', { headers: { 'x-lb-hash': '1st value, 2nd value' } })).value, '1st value, 2nd value');
    assert.equal(hashValue(u, request('/', { headers: { nothashme: 'just a value' } })).value, '');
  });
});

describe('cookie', () => {
  const u = upstream({ hash_on: 'cookie', hash_on_cookie: 'hashme' });

  test('does not reply with Set-Cookie if the cookie is already set', () => {
    const hash = hashValue(u, request('/', { headers: { cookie: 'other=1; hashme=some-cookie-value' } }));
    assert.deepEqual(hash, { value: 'some-cookie-value' });
  });

  test('replies with Set-Cookie if the cookie is not set', () => {
    const hash = hashValue(u, request('/', { headers: { cookie: 'some-other-cooke=some-other-value' } }));
    assert.match(hash.value, /^[0-9a-f-]{36}$/);
    assert.equal(hash.setCookie, `hashme=${hash.value}; Path=/; Same-Site=Lax; HttpOnly`);
    const withPath = hashValue(upstream({ hash_on: 'cookie', hash_on_cookie: 'c', hash_on_cookie_path: '/app' }), request('/'));
    assert.match(withPath.setCookie!, /; Path=\/app; /);
  });
});

describe('path', () => {
  test('simple case, only the path component, the normalized path, as a fallback', () => {
    assert.equal(valueFor('/my-path', { hash_on: 'path' }), '/my-path');
    assert.equal(valueFor('/my-path?a=1&b=2', { hash_on: 'path' }), '/my-path');
    assert.equal(valueFor('/root/../%2e/root///././%2F.subdir/../.subdir/./%28%29', { hash_on: 'path' }), '/root/.subdir/()');
    assert.equal(valueFor('/my-path?a=1&b=2', { hash_on: 'header', hash_on_header: 'my-nonexistent-header', hash_fallback: 'path' }), '/my-path');
  });
});

describe('uri_capture', () => {
  test('simple case, missing, missing with a fallback, as a fallback', () => {
    assert.equal(valueFor('/foo/123', { hash_on: 'uri_capture', hash_on_uri_capture: 'namespace' }), 'foo');
    assert.equal(valueFor('/foo/123', { hash_on: 'uri_capture', hash_on_uri_capture: 'id' }), '123');
    assert.equal(valueFor('/', { hash_on: 'uri_capture', hash_on_uri_capture: 'namespace' }), '');
    assert.equal(valueFor('/?test=1', { hash_on: 'uri_capture', hash_on_uri_capture: 'namespace', hash_fallback: 'query_arg', hash_fallback_query_arg: 'test' }), '1');
    assert.equal(
      valueFor('/my-namespace/123?a=1&b=2', { hash_on: 'query_arg', hash_on_query_arg: 'hashme', hash_fallback: 'uri_capture', hash_fallback_uri_capture: 'namespace' }),
      'my-namespace',
    );
  });
});

describe('query string arguments', () => {
  const on = (name: string) => ({ hash_on: 'query_arg', hash_on_query_arg: name });

  test("Kong's cases", () => {
    assert.equal(valueFor('/?hashme=123', on('hashme')), '123');
    assert.equal(valueFor('/', on('hashme')), '');
    assert.equal(valueFor('/?hashme', on('hashme')), 'true');
    assert.equal(valueFor('/?foo=', on('foo')), '');
    assert.equal(valueFor('/?fallback=123', { ...on('absent'), hash_fallback: 'query_arg', hash_fallback_query_arg: 'fallback' }), '123');
    assert.equal(valueFor('/?foo=b&foo=a&foo=c', on('foo')), 'a,b,c');
    assert.equal(valueFor('/?foo=s&foo&foo=1&foo=', on('foo')), ',1,s,true');
    assert.equal(valueFor('/?foo&foo&', on('foo')), 'true,true');
  });

  test('escaped argument names', () => {
    const names = ['{}', '\r\n', '.', '-----', '-1', '()', '&', '=', '//', '[]', '$', '@', '++', ';', "'", '"', '*', ',', '#', ' ', '%', '???'];
    names.forEach((name, i) => assert.equal(valueFor(`/?${encodeURIComponent(name)}=${i + 1}`, on(name)), String(i + 1), JSON.stringify(name)));
  });

  test('at most 100 arguments are read', () => {
    const many = Array.from({ length: 100 }, (_, i) => `a${i}=1`).join('&');
    assert.equal(valueFor(`/?${many}&late=1`, on('late')), '');
    assert.equal(valueFor(`/?late=1&${many}`, on('late')), '1');
  });
});

describe('consumer and ip', () => {
  test('the consumer (else its credential), and the client address', () => {
    const u = upstream({ hash_on: 'consumer', hash_fallback: 'ip' });
    assert.equal(hashValue(u, request('/', { consumer: { id: 'c-1' }, credential: { id: 'k-1' } })).value, 'c-1');
    assert.equal(hashValue(u, request('/', { credential: { id: 'k-1' } })).value, 'k-1');
    assert.equal(hashValue(u, request('/')).value, '10.1.2.3');
  });
});
