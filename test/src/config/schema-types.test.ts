/**
 * `Infer` is what `validate` returns: each value below is `validate`'s output for an input, typed as
 * the inferred type (so `tsc` proves the type admits it) and compared with what `validate` gave. The
 * type-level checks pin which fields are always there and which may be null. An explicit null reads as
 * a field's default (Kong hands code a stored null as absent), and a null list or map entry is refused
 * (Kong's validator requires them), so neither makes a value the type does not admit.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { validate, type Infer, type RecordSchema } from '../../../src/config/schema.ts';

const schema = {
  type: 'record',
  fields: {
    name: { type: 'string', required: true },
    mode: { type: 'string', one_of: ['fast', 'safe'], default: 'safe' },
    retries: { type: 'integer', required: true, default: 3 },
    timeout: { type: 'number' },
    tags: { type: 'array', elements: { type: 'string' } },
    hosts: { type: 'array', elements: { type: 'string', required: true }, default: [] },
    headers: { type: 'map', values: { type: 'string' } },
    limits: { type: 'record', fields: { burst: { type: 'integer', default: 10 }, note: { type: 'string' } } },
    extra: { type: 'record', fields: { note: { type: 'string' } } },
  },
} as const satisfies RecordSchema;

type Equal<A, B> = (<T>() => T extends A ? 1 : 2) extends <T>() => T extends B ? 1 : 2 ? true : false;
function typesAreEqual<A, B>(equal: Equal<A, B>): void {
  assert.equal(equal, true);
}

type Value = Infer<typeof schema>;

function validated(input: Record<string, unknown>): Value {
  const { value, issues } = validate<Value>(schema, input);
  assert.deepEqual(issues, []);
  return value;
}

test('required, defaulted and filled-in records are always there; other fields may be absent', () => {
  typesAreEqual<
    Value,
    {
      name: string;
      mode: 'fast' | 'safe';
      retries: number;
      hosts: string[];
      limits: { burst: number; note?: string | null };
      timeout?: number | null;
      tags?: string[] | null;
      headers?: Record<string, string> | null;
      extra?: { note?: string | null } | null;
    }
  >(true);
  const expected: Value = { name: 'a', mode: 'safe', retries: 3, hosts: [], limits: { burst: 10 } };
  assert.deepEqual(validated({ name: 'a' }), expected);
});

test('an explicit null reads as the default where there is one, and stays null in an optional field', () => {
  const expected: Value = { name: 'a', mode: 'safe', retries: 3, hosts: [], limits: { burst: 10 }, timeout: null, tags: null, extra: null };
  assert.deepEqual(validated({ name: 'a', mode: null, hosts: null, limits: null, timeout: null, tags: null, extra: null }), expected);
  assert.deepEqual(validated({ name: 'a', limits: { burst: null } }).limits, { burst: 10 });
});

test('a null in a required field, a list entry or a map value is refused', () => {
  const { issues } = validate(schema, { name: null, retries: null, tags: ['x', null], headers: { h: null } });
  assert.deepEqual(issues, [
    { path: ['name'], message: 'required field missing' },
    { path: ['retries'], message: 'required field missing' },
    { path: ['tags', 1], message: 'required field missing' },
    { path: ['headers', 'h'], message: 'required field missing' },
  ]);
});
