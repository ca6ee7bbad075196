/**
 * The PDK's schemas: validate fills defaults and names what is wrong with Kong's messages, and Infer
 * gives a schema written `as const satisfies RecordSchema` the type of what validate returns.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { validate, type Infer, type RecordSchema } from '../../../src/pdk/index.ts';

const schema = {
  type: 'record',
  fields: {
    header_name: { type: 'string', default: 'x-request-id', required: true },
    generator: { type: 'string', one_of: ['uuid', 'tracker'], default: 'uuid', required: true },
    limits: { type: 'record', fields: { minute: { type: 'integer', between: [1, 1000] } } },
    echo_downstream: { type: 'boolean', default: false, required: true },
  },
} as const satisfies RecordSchema;

type Config = Infer<typeof schema>;

test('an empty config comes back with every default, typed by Infer', () => {
  const { value, issues } = validate<Config>(schema, {});
  assert.deepEqual(issues, []);
  // Typed access: a misspelt field or a wrong type here would not compile.
  const generator: 'uuid' | 'tracker' = value.generator;
  const echo: boolean = value.echo_downstream;
  assert.equal(value.header_name, 'x-request-id');
  assert.equal(generator, 'uuid');
  assert.equal(echo, false);
});

test('wrong values are reported at their path, in Kong words', () => {
  const { issues } = validate(schema, { generator: 'random', echo_downstream: 'yes', limits: { minute: 1.5 } }, ['config']);
  assert.deepEqual(issues, [
    { path: ['config', 'generator'], message: 'expected one of: uuid, tracker' },
    { path: ['config', 'limits', 'minute'], message: 'expected an integer' },
    { path: ['config', 'echo_downstream'], message: 'expected a boolean' },
  ]);
});
