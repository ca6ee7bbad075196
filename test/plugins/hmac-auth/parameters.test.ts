/**
 * The `hmac` parameters are what Kong's pattern captures (kong/plugins/hmac-auth/access.lua, unanchored,
 * greedy groups), checked against that very pattern run by a backtracking engine (JavaScript's, with
 * PCRE's greedy semantics) on many short values, built from the pattern's own pieces so that near misses
 * abound; and hostile values of Node's largest header size.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { signatureParameters } from '../../../plugins/hmac-auth/signature.ts';
import { seeded } from '../../helpers/random.ts';

/** Kong's pattern; `.` does not cross a newline in either engine, and `\s` is PCRE's. */
const KONG_PATTERN = /[ \t\n\v\f\r]*[Hh]mac[ \t\n\v\f\r]*username="(.+)",[ \t\n\v\f\r]*algorithm="(.+)",[ \t\n\v\f\r]*headers="(.+)",[ \t\n\v\f\r]*signature="(.+)"/;

function kongParameters(value: string) {
  const m = KONG_PATTERN.exec(value);
  return m ? { username: m[1], algorithm: m[2], headers: m[3].split(' '), signature: m[4] } : undefined;
}

const PIECES = ['hmac', 'Hmac', 'HMAC', ' ', '  ', '\t', 'username="', 'algorithm="', 'headers="', 'signature="', '"', ',', '",', '", ', 'bob', 'date x', '='];
const VALID = ['hmac username="bob"', ',algorithm="hmac-sha1"', ', headers="date request-line"', ',signature="c2lnbmF0dXJl"'];

describe("hmac-auth: the parameters Kong's pattern captures", () => {
  it('HX01 a plain value, with or without spaces, a quote before it, a username holding `",`', () => {
    for (const value of [
      'hmac username="bob",algorithm="hmac-sha1",headers="date",signature="abc="',
      '"hmac username="bob",  algorithm="hmac-sha256", headers="date  request-line",signature="abc"',
      'Hmac username="a",b",algorithm="x",headers="d",signature="s"trailing"',
      'hmac username="",algorithm="x",headers="d",signature="s"',
    ]) {
      assert.deepEqual(signatureParameters(value), kongParameters(value), value);
    }
  });

  it('HX02 agrees with the pattern on 30 000 values made of its pieces', () => {
    const random = seeded(31);
    const pick = <T>(list: readonly T[]) => list[Math.floor(random() * list.length)];
    for (let n = 0; n < 30_000; n++) {
      let value: string;
      if (n % 2 === 0) {
        value = (random() < 0.5 ? 'hmac username="' : '') + Array.from({ length: Math.floor(random() * 24) }, () => pick(PIECES)).join('');
      } else {
        // A valid value with pieces thrown in between its parts.
        value = VALID.map((part) => part + (random() < 0.5 ? pick(PIECES) + pick(PIECES) : '')).join('');
      }
      assert.deepEqual(signatureParameters(value), kongParameters(value), JSON.stringify(value));
    }
  });

  it('HX03 hostile values of 16 KiB hold none (the last one takes a backtracking match of the pattern seconds: cubic time)', () => {
    for (const unit of ['",', '",signature="x', '"', 'hmac username="', 'x",algorithm="y",headers="z']) {
      assert.equal(signatureParameters('hmac username="' + unit.repeat(Math.floor(16_000 / unit.length)) + '"'), undefined, unit);
    }
    const long = 'hmac username="a' + '",algorithm="x'.repeat(1000) + '",headers="d",signature="s"';
    assert.equal(signatureParameters(long)?.username.length, 1 + 14 * 999);
  });
});
