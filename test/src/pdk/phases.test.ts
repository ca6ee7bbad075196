/**
 * Each hook gets the context of its phase, as Kong's PDK checks phases: a call a phase may not make does
 * not compile. The checks are the @ts-expect-error lines (the typecheck fails if a call they mark
 * compiles); the test runs helpers written against the narrowest context on every phase's.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { AccessContext, LogContext, RequestView, ResponseContext } from '../../../src/pdk/index.ts';

/** Never run: the lines below must not compile. */
export function callsInTheWrongPhase(response: ResponseContext, log: LogContext): void {
  // @ts-expect-error what goes upstream cannot change once the upstream answered
  response.setUpstreamHeader('x-late', 'no');
  // @ts-expect-error the answer is under way: no other one
  response.respond(500);
  // @ts-expect-error the body went upstream already
  void response.readBody();
  // @ts-expect-error the outcome is known only once the answer went downstream
  void response.outcome;
  // @ts-expect-error the request is over
  log.setUpstreamHeader('x-late', 'no');
  // @ts-expect-error the caller was identified in access
  log.consumer = null;
}

/** A helper on the read-only view takes any phase's context. */
function routeName(ctx: RequestView): string {
  return ctx.route.name ?? ctx.route.id;
}

test('a helper on the request view reads the same in every phase', () => {
  const view = { route: { id: 'r1', name: 'orders' } };
  const phases = [view as unknown as AccessContext, view as unknown as ResponseContext, view as unknown as LogContext];
  assert.deepEqual(phases.map(routeName), ['orders', 'orders', 'orders']);
});
