/** Request parameters as the PDK reads them: Kong's query and form rules, and the limits on what a client may send. */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { decodeArg, MAX_PARAMETERS, mediaType, parseArgs, RequestLimitError } from '../../../src/pdk/index.ts';

test('repeated keys become arrays, a bare key is true, + is a space', () => {
  assert.deepEqual({ ...parseArgs('a=1&a=2&flag&q=two+words&&') }, { a: ['1', '2'], flag: true, q: 'two words' });
});

test('a __proto__ argument is an argument like any other', () => {
  const params = parseArgs('__proto__=x');
  assert.equal(Object.getPrototypeOf(params), null);
  assert.equal(params.__proto__, 'x');
});

test('more than the limit of arguments is refused with a 400', () => {
  const many = Array.from({ length: MAX_PARAMETERS + 1 }, (_, i) => `k${i}=v`).join('&');
  assert.equal(Object.keys(parseArgs(many)).length, MAX_PARAMETERS + 1);
  assert.throws(() => parseArgs(many, MAX_PARAMETERS), (err) => err instanceof RequestLimitError && err.status === 400);
});

test('a malformed escape is kept as sent; a media type loses its parameters and case', () => {
  assert.equal(decodeArg('100%+sure%zz'), '100% sure%zz');
  assert.equal(mediaType('Application/JSON; charset=utf-8'), 'application/json');
  assert.equal(mediaType(undefined), '');
});
