/**
 * How an exception ends its request and never the process. The lifecycle and the proxy step run a
 * request as callbacks from the event loop and promise continuations; each such step is contained, and
 * what it throws is answered (an HttpError with its status, anything else with a logged 500), or, when
 * the answer has begun, cuts the response off. Failures are logged on the request's own logger.
 */
import type { Context } from './context.ts';
import { HttpError } from './http-error.ts';

/** Runs one step of a request: whatever it throws ends this request, never the process. */
export function contain(ctx: Context, step: () => void): void {
  try {
    step();
  } catch (err) {
    failRequest(ctx, err);
  }
}

/**
 * Ends the request with the error's answer (an HttpError's status, anything else 500 and logged), or,
 * when its answer has begun, cuts it off (and the upstream exchange with it).
 */
export function failRequest(ctx: Context, err: unknown): void {
  if (!(err instanceof HttpError)) ctx.log.error({ err, request_id: ctx.id }, 'request failed');
  if (ctx.responded && ctx.downstream.headersSent) return ctx.downstream.abort();
  try {
    // No answer went out, whatever status was noted for one (an upgrade marked 101, an answer Node refused).
    ctx.status = 0;
    return ctx.fail(err);
  } catch (again) {
    ctx.log.error({ err: again, request_id: ctx.id }, 'the failure could not be answered');
  }
  ctx.abortUpstream?.();
  ctx.downstream.abort();
}
