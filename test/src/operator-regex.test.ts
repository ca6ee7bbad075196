/**
 * The operator regex engine (RE2 semantics, re2js): Kong's dialect (named groups in both spellings,
 * inline flags), what it refuses and where, an anchored pattern that cannot escape its anchoring, and,
 * for patterns that worked on JS RegExp, the same matches and captures as before (minus one documented
 * difference: a group inside a repetition keeps its last match, as PCRE and Kong have it).
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { RegexRefusedError } from '../../src/errors.ts';
import { compileOperatorRegex, operatorRegexProblem } from '../../src/operator-regex.ts';

const ANCHORED = { anchored: true, ignoreCase: false };

/** Route regexes as kong.yml files write them, and paths each should or should not match. */
const CORPUS: [string, string[]][] = [
  ['/users/(?<id>\\d+)', ['/users/42', '/users/42/orders', '/users/x', '/v1/users/42']],
  ['/api/(?<version>v[0-9]+)/(?<rest>.*)', ['/api/v2/orders/17', '/api/v2/', '/api/x/']],
  ['/files/([^/]+)\\.(json|xml)$', ['/files/a.b.json', '/files/a.xml', '/files/a.json/x']],
  ['/v1/(.*)/(.*)/items$', ['/v1/a/b/items', '/v1/a/b/c/items', '/v1/items']],
  ['/(foo|foobar)(/.*)?$', ['/foobar', '/foo/x', '/foob']],
  ['/lazy/(.*?)/(.*)', ['/lazy/a/b/c', '/lazy//']],
  ['/opt(/(?<tail>[a-z]+))?', ['/opt', '/opt/abc', '/opt/123']],
  ['/\\w+-\\d{2,4}', ['/ab-123', '/ab-1', '/ab-12345']],
];

test('patterns that worked on JS RegExp match the same text with the same captures', () => {
  for (const [source, paths] of CORPUS) {
    const linear = compileOperatorRegex(source, ANCHORED);
    const js = new RegExp(`^(?:${source})`);
    for (const path of paths) {
      const expected = js.exec(path);
      const found = linear.exec(path);
      assert.equal(linear.test(path), expected !== null, `${source} on ${path}`);
      assert.deepEqual(found?.groups ?? null, expected ? [...expected] : null, `${source} on ${path}`);
      assert.deepEqual(found?.named ?? null, expected ? { ...expected.groups } : null, `${source} on ${path}`);
    }
  }
});

test("Kong's dialect: (?P<name>…) as (?<name>…), inline (?i), case-insensitive header regexes", () => {
  assert.deepEqual(compileOperatorRegex('/u/(?P<user>[a-z]+)', ANCHORED).exec('/u/john/x')?.named, { user: 'john' });
  assert.ok(compileOperatorRegex('(?i)/Admin', ANCHORED).test('/aDMIN/x'));
  assert.ok(compileOperatorRegex('/a(?i:B)c', ANCHORED).test('/abc'));
  assert.ok(!compileOperatorRegex('/a(?i:B)c', ANCHORED).test('/abC'));
  assert.ok(compileOperatorRegex('^mobile', { anchored: false, ignoreCase: true }).test('MOBILE Safari'));
  assert.ok(compileOperatorRegex('safari', { anchored: false, ignoreCase: true }).test('Mobile Safari'), 'unanchored: anywhere in the value');
});

test('a group inside a repetition keeps its last match, as in PCRE (JS RegExp forgot it)', () => {
  assert.deepEqual(compileOperatorRegex('/((a)|b)+', ANCHORED).exec('/ab')?.groups, ['/ab', 'b', 'a']);
});

test('what needs backtracking is refused, with the position of the construct in the pattern', () => {
  const refusals: [string, string, number][] = [
    ['/(a)\\1', 'a backreference', 4],
    ['/(?<n>a)\\k<n>', 'a backreference', 8],
    ['/(?P<n>a)(?P=n)', 'a backreference', 9],
    ['/x(?=y)', 'a lookahead', 2],
    ['/x(?!y)', 'a negative lookahead', 2],
    ['/(?<=x)y', 'a lookbehind', 1],
    ['/(?<!x)y', 'a negative lookbehind', 1],
    ['/(?>x+)y', 'an atomic group', 1],
  ];
  for (const [source, name, position] of refusals) {
    assert.throws(() => compileOperatorRegex(source, ANCHORED), (err: unknown) => {
      assert.ok(err instanceof RegexRefusedError, source);
      assert.equal(err.code, 'TOLLGATE_ERR_REGEX_REFUSED');
      assert.equal(err.position, position, source);
      assert.equal(err.message, `${name} is not supported by the linear-time engine (RE2), at position ${position}`);
      return true;
    });
  }
  // Inside a character class these are plain characters.
  assert.equal(operatorRegexProblem('/[(?=]\\d', ANCHORED), undefined);
  assert.equal(operatorRegexProblem('/x++', ANCHORED), 'invalid nested repetition operator: `++`, at position 2');
  assert.equal(operatorRegexProblem('/\\u0041', ANCHORED), 'invalid escape sequence: `\\u`, at position 1');
});

test('an anchored pattern cannot close its anchoring group and match anywhere', () => {
  assert.match(operatorRegexProblem('/a)|(.*', ANCHORED) ?? '', /^unexpected \)/);
});

test('the shapes that backtrack exponentially or polynomially finish on long text', () => {
  const exponential = compileOperatorRegex('/x/(a|aa)+$', ANCHORED);
  assert.equal(exponential.exec(`/x/${'a'.repeat(100_000)}!`), null);
  const cubic = compileOperatorRegex('/v1/(.*)/(.*)/(.*)/items$', ANCHORED);
  assert.equal(cubic.exec(`/v1/${'a/'.repeat(50_000)}`), null);
});
