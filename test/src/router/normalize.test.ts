/** Kong's uri normalization, upstream escaping, and the config validators. */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import {
  escapeUpstreamPath,
  normalizePath,
  validateRouteHeaderValue,
  validateRouteHost,
  validateRoutePath,
} from '../../../src/router/index.ts';

test('normalizePath: documented examples and dot segments', () => {
  const cases: [string, string][] = [
    ['/', '/'],
    ['/foo/./bar/../baz', '/foo/baz'],
    ['/fo%6F', '/foo'],
    ['/foo/%2E%2E/bar', '/bar'],
    ['/foo/%2e/bar', '/foo/bar'],
    ['/../../etc/passwd', '/etc/passwd'],
    ['/a/b/..', '/a/'],
    ['/a/b/.', '/a/b/'],
    ['/a/..', '/'],
    ['/..', '/'],
    ['//a///b//', '/a/b/'],
    ['/route%2E%2E/req', '/route../req'],
    ['/a.b/c..d/', '/a.b/c..d/'],
  ];
  for (const [raw, expected] of cases) assert.equal(normalizePath(raw), expected, raw);
});

test('normalizePath: unreserved escapes decoded, reserved and other escapes upper-cased', () => {
  assert.equal(normalizePath('/%41%7a%2d%2E%5F%7E'), '/Az-._~');
  assert.equal(normalizePath('/a%2fb%3a%c3%a9'), '/a%2Fb%3A%C3%A9');
  assert.equal(normalizePath('/a%252e'), '/a%252e', 'decodes one level only');
});

test('normalizePath: invalid inputs give null', () => {
  for (const raw of ['', 'foo', '*', '/a%', '/a%2', '/a%g1', 'http://x/']) assert.equal(normalizePath(raw), null, raw);
});

test('escapeUpstreamPath: keeps unreserved, reserved and escapes; escapes the rest', () => {
  assert.equal(escapeUpstreamPath("/a-._~!$&'()*+,;=:@/%2F"), "/a-._~!$&'()*+,;=:@/%2F");
  assert.equal(escapeUpstreamPath('/a b"<>\\^`{|}'), '/a%20b%22%3C%3E%5C%5E%60%7B%7C%7D');
  assert.equal(escapeUpstreamPath('/\u00e9'), '/%E9', 'latin1 char = one raw request byte');
  assert.equal(escapeUpstreamPath('/\u20ac'), '/%E2%82%AC');
});

test('validateRoutePath: Kong messages', () => {
  assert.equal(validateRoutePath('/foo'), undefined);
  assert.equal(validateRoutePath('/'), undefined);
  assert.equal(validateRoutePath('~/users/(?<id>\\d+)$'), undefined);
  assert.equal(validateRoutePath('foo'), 'should start with: / (fixed path) or ~/ (regex path)');
  assert.equal(validateRoutePath('~foo'), 'should start with: / (fixed path) or ~/ (regex path)');
  assert.equal(validateRoutePath('/a//b'), 'must not have empty segments');
  assert.equal(validateRoutePath('/foo/../x'), "non-normalized path, consider use '/x' instead");
  assert.equal(validateRoutePath('/fo%6f'), "non-normalized path, consider use '/foo' instead");
  assert.equal(validateRoutePath('/a%2fb'), "non-normalized path, consider use '/a%2Fb' instead");
  assert.equal(validateRoutePath('/a%zz'), "invalid url-encoded value: '%zz'");
  assert.equal(validateRoutePath('/a b'), "invalid path: '/a b' (characters outside of the reserved list of RFC 3986 found)");
  assert.match(validateRoutePath('~/a(') ?? '', /^invalid regex: '\/a\(' \(/);
});

test('validateRoutePath: what needs a backtracking engine is refused with its position; nested quantifiers run in linear time', () => {
  assert.equal(validateRoutePath('~/(\\w+)/\\1'), "invalid regex: '/(\\w+)/\\1' (a backreference is not supported by the linear-time engine (RE2), at position 7)");
  assert.equal(validateRoutePath('~/(?=a)'), "invalid regex: '/(?=a)' (a lookahead is not supported by the linear-time engine (RE2), at position 1)");
  for (const path of ['~/(a+)+$', '~/(x*)*y', '~/((ab)*)+c', '~/files/[^/]+/.*\\.json$']) assert.equal(validateRoutePath(path), undefined, path);
});

test('validateRouteHost', () => {
  for (const ok of ['example.com', '*.example.com', 'example.*', 'example.com:8000', '*.example.com:443', '10.0.0.1', '[::1]', '[::1]:80', 'localhost']) {
    assert.equal(validateRouteHost(ok), undefined, ok);
  }
  assert.equal(validateRouteHost('*.example.*'), 'invalid wildcard: must have at most one wildcard');
  assert.equal(validateRouteHost('a.*.com'), 'invalid wildcard: must be placed at leftmost or rightmost label');
  assert.equal(validateRouteHost('*example.com'), 'invalid wildcard: must be placed at leftmost or rightmost label');
  assert.equal(validateRouteHost('example.com:99999'), 'invalid port number');
  assert.equal(validateRouteHost('example.com:abc'), 'invalid hostname: example.com:abc'); // Kong reads a port only from digits
  assert.equal(validateRouteHost('exa mple.com'), 'invalid hostname: exa mple.com');
  assert.equal(validateRouteHost(''), 'invalid hostname: ');
});

test('validateRouteHeaderValue', () => {
  assert.equal(validateRouteHeaderValue('plain value'), undefined);
  assert.equal(validateRouteHeaderValue('~*^v\\d+$'), undefined);
  assert.match(validateRouteHeaderValue('~*(') ?? '', /^invalid regex: '\(' /);
  assert.equal(validateRouteHeaderValue('~*(a+)+'), undefined);
  assert.match(validateRouteHeaderValue('~*(?<!x)y') ?? '', /^invalid regex: '\(\?<!x\)y' \(a negative lookbehind .* at position 0\)$/);
});
