/**
 * Which thresholds a usage reaches, in exact decimals: of each kind (usage, balance) only the most
 * advanced one, at or past its level (a balance threshold at or below its value), none of a percentage
 * without a limit, and decimals that binary floating point would get wrong.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Decimal } from 'decimal.js';
import { levelsOf, reached } from '../../../../plugins/metering/notification/thresholds.ts';
import type { Threshold } from '../../../../plugins/metering/notification/model.ts';

const at = (thresholds: Threshold[], limit: string, usage: string) => reached(levelsOf(thresholds, new Decimal(limit)), new Decimal(usage)).map((t) => `${t.type}:${t.value}`);

test('usage thresholds: the highest reached, from exactly its level', () => {
  const rule: Threshold[] = [{ value: 80, type: 'usage_percentage' }, { value: 100, type: 'usage_percentage' }, { value: 5, type: 'usage_value' }];
  assert.deepEqual(at(rule, '10', '4'), []);
  assert.deepEqual(at(rule, '10', '5'), ['usage_value:5']);
  assert.deepEqual(at(rule, '10', '8'), ['usage_percentage:80']);
  assert.deepEqual(at(rule, '10', '12'), ['usage_percentage:100']);
});

test('balance thresholds: the lowest balance reached, beside the usage one', () => {
  const rule: Threshold[] = [{ value: 3, type: 'balance_value' }, { value: 0, type: 'balance_value' }, { value: 50, type: 'PERCENT' }];
  assert.deepEqual(at(rule, '10', '6'), ['PERCENT:50']);
  assert.deepEqual(at(rule, '10', '7'), ['PERCENT:50', 'balance_value:3']);
  assert.deepEqual(at(rule, '10', '10'), ['PERCENT:50', 'balance_value:0']);
  assert.deepEqual(at(rule, '10', '15'), ['PERCENT:50', 'balance_value:0'], 'past the limit the balance stays 0');
});

test('exact decimals; a percentage of no limit is never reached', () => {
  // 0.1 + 0.2 in doubles is 0.30000000000000004: 30 % of 1 is reached at exactly 0.3.
  assert.deepEqual(at([{ value: 30, type: 'usage_percentage' }], '1', '0.3'), ['usage_percentage:30']);
  assert.deepEqual(at([{ value: 30, type: 'usage_percentage' }], '1', '0.2999999999999999999'), []);
  assert.deepEqual(at([{ value: 80, type: 'usage_percentage' }], '0', '100'), []);
});
