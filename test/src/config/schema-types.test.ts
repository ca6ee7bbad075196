/**
 * `Infer` is what `validate` returns: each value below is `validate`'s output for an input, typed as
 * the inferred type (so `tsc` proves the type admits it) and compared with what `validate` gave. The
 * type-level checks pin which fields are always there and which may be null; `InferIgnoringStrayNulls`
 * differs from `Infer` only by the explicit nulls of defaulted fields and list or map entries.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { validate, type Infer, type InferIgnoringStrayNulls, type RecordSchema } from '../../../src/config/schema.ts';

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
type IgnoringStrayNulls = InferIgnoringStrayNulls<typeof schema>;

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
      mode: 'fast' | 'safe' | null;
      retries: number;
      hosts: string[] | null;
      limits: { burst: number | null; note?: string | null } | null;
      timeout?: number | null;
      tags?: (string | null)[] | null;
      headers?: Record<string, string | null> | null;
      extra?: { note?: string | null } | null;
    }
  >(true);
  const expected: Value = { name: 'a', mode: 'safe', retries: 3, hosts: [], limits: { burst: 10 } };
  assert.deepEqual(validated({ name: 'a' }), expected);
});

test('an explicit null stays where the field is not required, defaults and list entries included', () => {
  const expected: Value = { name: 'a', mode: null, retries: 3, hosts: [], limits: null, timeout: null, tags: ['x', null], headers: { h: null } };
  assert.deepEqual(validated({ name: 'a', mode: null, limits: null, timeout: null, tags: ['x', null], headers: { h: null } }), expected);
});

test('InferIgnoringStrayNulls leaves out the nulls of defaulted fields and entries, not of optional fields', () => {
  typesAreEqual<
    IgnoringStrayNulls,
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
  const value = validated({ name: 'a', mode: null });
  // @ts-expect-error: the stray null `validate` keeps is what this type leaves out.
  const ignoring: IgnoringStrayNulls = value;
  assert.equal(ignoring.mode, null);
});
