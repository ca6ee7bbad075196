/**
 * Quota counters, the arithmetic of hard limits: proves (on random rounds, seeded) that no sequence of
 * reservations, releases and floors ever reserves past the limit, that a round's n-th request is told
 * exactly what remains after it, that a soft limit counts every request, and that whole numbers and
 * decimals give the same answers.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { adjustedOn, answerOf, difference, QuotaCounters, reserveOn } from '../../../src/process/quota-counters.ts';
import { seeded } from '../../helpers/random.ts';

const SEED = Number(process.env.QUOTA_SEED ?? 20261129);

test(`random rounds never reserve past the limit, and every answer says what remains (seed ${SEED})`, () => {
  const next = seeded(SEED);
  const int = (n: number) => Math.floor(next() * n);
  for (let run = 0; run < 300; run++) {
    const counters = new QuotaCounters();
    const limit = int(50);
    const amount = int(3);
    let counted = 0;
    let floor = 0;
    for (let step = 0; step < 40; step++) {
      if (next() < 0.2) floor = Math.max(floor, counted - int(3));
      if (next() < 0.25 && counted > 0) {
        const back = Math.min(counted, int(3));
        counters.adjust('k', String(-back));
        counted -= back;
        continue;
      }
      const requests = 1 + int(30);
      const request = { key: 'k', limit: String(limit), floor: String(floor), amount: String(amount), requests, expiresAt: Date.now() + 60_000 };
      const round = counters.reserve(request);
      const base = Math.max(counted, floor);
      assert.equal(round.before, String(base), `seed ${SEED} run ${run} step ${step}`);
      const fit = amount === 0 ? (base < limit ? requests : 0) : Math.max(0, Math.min(requests, Math.floor((limit - base) / amount)));
      assert.equal(round.reserved, fit, `seed ${SEED} run ${run} step ${step}`);
      counted = base + amount * fit;
      if (amount > 0) assert.ok(counted <= Math.max(limit, base), `seed ${SEED}: ${counted} reserved past ${limit}`);
      for (let n = 0; n < requests; n++) {
        const answer = answerOf(round, n, request);
        assert.equal(answer.reserved, n < fit);
        assert.equal(answer.remaining, String(Math.max(0, limit - base - amount * (n < fit ? n + 1 : fit))));
      }
    }
  }
});

test('a soft limit counts every request and still says what remains', () => {
  const { next, reservation } = reserveOn('4', { limit: '5', soft: true, floor: '0', amount: '1', requests: 3 });
  assert.deepEqual(reservation, { before: '4', reserved: 3 });
  assert.equal(next, '7');
  assert.deepEqual(answerOf(reservation, 0, { limit: '5', amount: '1' }), { reserved: true, remaining: '0' });
});

test('decimal amounts and limits are exact, and agree with whole numbers where both apply', () => {
  const decimal = reserveOn('0.1', { limit: '0.35', floor: '0', amount: '0.1', requests: 5 });
  assert.deepEqual(decimal.reservation, { before: '0.1', reserved: 2 });
  assert.equal(decimal.next, '0.3');
  assert.deepEqual(answerOf(decimal.reservation, 1, { limit: '0.35', amount: '0.1' }), { reserved: true, remaining: '0.05' });
  const huge = reserveOn('99999999999999999999', { limit: '100000000000000000001', floor: '0', amount: '1', requests: 5 });
  assert.deepEqual(huge.reservation, { before: '99999999999999999999', reserved: 2 });
  assert.equal(adjustedOn('0.3', '-1'), '0', 'a release never goes below zero');
  assert.equal(adjustedOn('3', '-1'), '2');
  assert.equal(difference('0', '1'), '-1');
  assert.equal(difference('2.5', '0.25'), '2.25');
});

test('a counter past its expiry starts again from its floor', () => {
  const counters = new QuotaCounters();
  const request = { key: 'k', limit: '3', floor: '0', amount: '1', requests: 3, expiresAt: Date.now() - 1 };
  counters.reserve(request, Date.now() - 10);
  assert.deepEqual(counters.reserve({ ...request, requests: 1 }), { before: '0', reserved: 1 });
});
