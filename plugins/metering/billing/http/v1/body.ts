/** Request bodies of the v1 billing areas, read as the v3 mapping reads its own (numbers keep their text). */
import { validationFailed } from '../../shared/errors.ts';
import { isObject } from '../../shared/fields.ts';
import { parseExactJson } from '../../shared/exact-json.ts';
import { readJson, type MeteringRequest } from '../../../http/http.ts';
import type { MeteringConfig } from '../../../schema.ts';
import { fromV1 } from '../../../http/v1/shapes.ts';

/** A v1 body as the domain reads it; `null` metadata is v1's "none". */
export async function v1Body(ctx: MeteringRequest, config: MeteringConfig): Promise<Record<string, unknown>> {
  const raw = await readJson(ctx, config.max_body_size, parseExactJson);
  const body = fromV1(raw ?? {});
  if (!isObject(body)) throw validationFailed([{ field: '', reason: 'request body must be a JSON object', rule: 'type', source: 'body' }]);
  if (body.labels === null) delete body.labels;
  return body;
}

