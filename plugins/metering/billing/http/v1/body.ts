/** Request bodies of the v1 billing areas, read as the v3 mapping reads its own (numbers keep their text). */
import { validationFailed } from '../../shared/errors.ts';
import { isObject } from '../../shared/fields.ts';
import { parseExactJson } from '../../shared/exact-json.ts';
import { readJson, type MeteringRequest } from '../../../http/http.ts';
import type { MeteringConfig } from '../../../schema.ts';
import { fromV1 } from '../../../http/v1/shapes.ts';

/** The v1 body as sent (an object; numbers' texts kept, see numberText). */
export async function rawBody(ctx: MeteringRequest, config: MeteringConfig): Promise<Record<string, unknown>> {
  const raw = (await readJson(ctx, config.max_body_size, parseExactJson)) ?? {};
  if (!isObject(raw)) throw validationFailed([{ field: '', reason: 'request body must be a JSON object', rule: 'type', source: 'body' }]);
  return raw;
}

/** A v1 body with v3's names, as the domain reads it; `null` metadata is v1's "none". */
export async function v1Body(ctx: MeteringRequest, config: MeteringConfig): Promise<Record<string, unknown>> {
  const body = fromV1<Record<string, unknown>>(await rawBody(ctx, config));
  if (body.labels === null) delete body.labels;
  return body;
}

