/**
 * Errors as OpenMeter's v1 API answers them: RFC 7807 with `type: about:blank` and the HTTP status text
 * as title (the SDK reads the body only with exactly `application/problem+json`). The status of a
 * metering or billing error is chosen where the v3 mapping chooses it; field names become v1's camelCase.
 */
import type { InvalidParameter } from '../../shared/errors.ts';
import { CUSTOMER_DIMENSION } from '../../query/port.ts';
import { BillingError } from '../../billing/port.ts';
import { billingProblem } from '../../billing/http/http.ts';
import { toProblem, type MeteringRequest, type Problem } from '../http.ts';
import { camelName } from './shapes.ts';

const TITLES: Record<number, string> = {
  400: 'Bad Request', 401: 'Unauthorized', 403: 'Forbidden', 404: 'Not Found', 405: 'Method Not Allowed', 409: 'Conflict', 410: 'Gone',
  412: 'Precondition Failed', 413: 'Payload Too Large', 501: 'Not Implemented', 503: 'Service Unavailable',
};
const titleOf = (status: number) => TITLES[status] ?? (status >= 500 ? 'Internal Server Error' : 'Error');

/** A meter query's filters v1 sends as parameters of their own (named so wherever the query fails, customers' lookup too). */
export const V1_QUERY_FILTERS: Record<string, string> = { 'filters.dimensions.subject': 'subject', [`filters.dimensions.${CUSTOMER_DIMENSION}`]: 'filterCustomerId' };

/** `usage_attribution.subject_keys[0]` -> `usageAttribution.subjectKeys[0]` (names v1 already uses are kept). */
export function v1FieldName(field: string): string {
  if (V1_QUERY_FILTERS[field]) return V1_QUERY_FILTERS[field];
  return field.replace(/[a-z0-9_]+/gi, (part) => (part === 'labels' ? 'metadata' : camelName(part)));
}

export function v1Problems(problems: InvalidParameter[], rename: (field: string) => string = v1FieldName): InvalidParameter[] {
  return problems.map((p) => ({ ...p, field: rename(p.field) }));
}

function problemOf(err: unknown): Problem {
  return err instanceof BillingError ? billingProblem(err) : toProblem(err);
}

export function sendV1Problem(ctx: MeteringRequest, err: unknown): void {
  const p = problemOf(err);
  const body: Record<string, unknown> = { type: 'about:blank', title: titleOf(p.status), status: p.status, detail: p.detail, instance: `urn:request:${ctx.id}`, code: p.code };
  if (p.invalidParameters) body.invalidParameters = v1Problems(p.invalidParameters);
  ctx.respond(p.status, JSON.stringify(body), { 'content-type': 'application/problem+json', ...p.headers });
}
