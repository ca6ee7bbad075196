/**
 * The core's view of a request's context, wider than any phase context the PDK shows plugins: the
 * downstream request and response, and the state the response phase keeps. Context (context.ts)
 * implements it; the modules context.ts uses name this type instead, so that none imports it back.
 */
import type { IncomingMessage, OutgoingHttpHeaders, ServerResponse } from 'node:http';
import type { Http2ServerRequest, Http2ServerResponse } from 'node:http2';
import type { Consumer, PluginInstance } from '../config/types.ts';
import type { Logger } from '../log.ts';
import type { AccessContext, AuthenticatedCredential, BodyObserver, BodyTransform, LogContext, PluginRuntime, RequestView, ResponseContext } from '../pdk/types.ts';

export type DownstreamRequest = IncomingMessage | Http2ServerRequest;
export type DownstreamResponse = ServerResponse | Http2ServerResponse;

/** A plugin whose phases run on this request. */
export interface RanPlugin {
  runtime: PluginRuntime;
  plugin: PluginInstance;
}

export interface CoreContext extends AccessContext, ResponseContext, LogContext {
  // Read-only to the later phases, set in access.
  consumer: Consumer | null;
  credential: AuthenticatedCredential | null;
  /** The downstream request and response: what the proxy streams from and to (gRPC, HTTP/2). */
  readonly raw: { req: DownstreamRequest; res: DownstreamResponse };
  /** The path as the request target gave it, before normalization (nginx's `$request_uri` less the query). */
  readonly rawPath: string;
  readonly log: Logger;
  /** Plugins whose access phase ran, for the response and log phases. */
  ran: RanPlugin[] | undefined;
  /** The response phase ran (it runs once, on the first answer that goes downstream). */
  responsePhaseRan: boolean;
  /** Headers plugins set for the downstream answer during access (kong.response.set_header). */
  responseHeaders: Record<string, string | string[]> | undefined;
  /** Plugins watching the response body go by (ResponseHead.observeBody); undefined when none. */
  bodyObservers: BodyObserver[] | undefined;
  /** Plugins turning the response body into another as it streams (ResponseHead.transformBody); undefined when none. */
  bodyTransforms: BodyTransform[] | undefined;
  /** The upstream's status, once it answered. */
  upstreamStatus: number | undefined;
  /** Milliseconds spent waiting for the upstream's first byte. */
  upstreamLatency: number | undefined;
  /** Milliseconds the gateway spent before the upstream request went out, or before its own answer. */
  kongLatency: number;
  /** The head that went downstream, for the log serializer. */
  responseHead: OutgoingHttpHeaders | undefined;
}

/**
 * The downstream request behind a context the core made (every context a plugin or the toolkit is given
 * is one): for what the PDK does not show, such as the headers as the client sent them.
 */
export function downstreamRequestOf(ctx: RequestView): DownstreamRequest {
  return (ctx as CoreContext).raw.req;
}
