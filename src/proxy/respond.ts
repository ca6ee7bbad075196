/**
 * Answers the gateway produces itself: Kong's `{"message": ...}` JSON errors, and their gRPC shape
 * (`content-type: application/grpc`, `grpc-status`, a readable `grpc-message`, no body) so that a
 * gRPC client never sees JSON.
 */
import type { OutgoingHttpHeaders } from 'node:http';

export const SERVER_TOKEN = 'tollgate/0.1.0';

/** Kong's HTTP → gRPC status mapping (kong/pdk/response.lua). */
const GRPC_STATUS: Record<number, number> = {
  200: 0, 400: 3, 401: 16, 403: 7, 404: 5, 409: 6, 429: 8, 499: 1, 500: 13, 501: 12, 503: 14, 504: 4,
  // Not in Kong's table: an unreachable upstream is UNAVAILABLE as the gRPC spec maps 502.
  502: 14,
};

export function grpcStatusFor(httpStatus: number): number {
  const mapped = GRPC_STATUS[httpStatus];
  if (mapped !== undefined) return mapped;
  if (httpStatus >= 500) return 13;
  if (httpStatus >= 400) return 3;
  if (httpStatus >= 200 && httpStatus < 300) return 0;
  return 2;
}

/** grpc-message is percent-encoded (gRPC over HTTP/2 spec). */
export function encodeGrpcMessage(message: string): string {
  return message.replace(/[^\x20-\x24\x26-\x7e]/gu, (c) =>
    [...Buffer.from(c, 'utf8')].map((b) => '%' + b.toString(16).toUpperCase().padStart(2, '0')).join(''),
  );
}

export interface Answer {
  status: number;
  headers: OutgoingHttpHeaders;
  body: Buffer;
}

export function jsonAnswer(status: number, payload: unknown, headers: OutgoingHttpHeaders = {}): Answer {
  const body = Buffer.from(JSON.stringify(payload));
  return { status, headers: { 'content-type': 'application/json; charset=utf-8', ...headers, 'content-length': body.length }, body };
}

export function grpcErrorAnswer(status: number, message: string, headers: OutgoingHttpHeaders = {}): Answer {
  return {
    status,
    headers: {
      ...headers,
      'content-type': 'application/grpc',
      // An explicit grpc-status (e.g. 1 for "gRPC request matched gRPCs route" on an HTTP 200) wins.
      'grpc-status': headers['grpc-status'] ?? String(grpcStatusFor(status)),
      'grpc-message': encodeGrpcMessage(message),
      'content-length': 0,
    },
    body: Buffer.alloc(0),
  };
}

/** Canonical names of the gRPC status codes, as Kong writes them when an answer has no message. */
const GRPC_CODE_NAMES = [
  'OK', 'Canceled', 'Unknown', 'InvalidArgument', 'DeadlineExceeded', 'NotFound', 'AlreadyExists', 'PermissionDenied',
  'ResourceExhausted', 'FailedPrecondition', 'Aborted', 'OutOfRange', 'Unimplemented', 'Internal', 'Unavailable', 'DataLoss', 'Unauthenticated',
];

/**
 * A plugin's answer to a gRPC request (Kong's `kong.response.exit`): the gRPC shape, with the body's
 * `message` (or an OAuth error's `error_description`, or a text body) as grpc-message, else the code's name.
 */
function grpcBodyAnswer(status: number, body: string | Buffer | object | undefined, headers: OutgoingHttpHeaders = {}): Answer {
  return grpcErrorAnswer(status, readableMessage(body) ?? GRPC_CODE_NAMES[grpcStatusFor(status)], headers);
}

/** A plugin's own answer: as given, or gRPC-shaped for a gRPC call (a gRPC client could not read JSON or text). */
export function pluginAnswer(isGrpc: boolean, status: number, body: string | Buffer | object | undefined, headers: OutgoingHttpHeaders = {}): Answer {
  return isGrpc ? grpcBodyAnswer(status, body, headers) : bodyAnswer(status, body, headers);
}

function readableMessage(body: string | Buffer | object | undefined): string | undefined {
  if (typeof body === 'string') return body || undefined;
  if (!body || Buffer.isBuffer(body)) return undefined;
  const { message, error_description: description } = body as Record<string, unknown>;
  if (typeof message === 'string') return message;
  return typeof description === 'string' ? description : undefined;
}

export function errorAnswer(status: number, message: string, requestId: string, grpc: boolean, headers: OutgoingHttpHeaders = {}): Answer {
  return grpc ? grpcErrorAnswer(status, message, headers) : jsonAnswer(status, { message, request_id: requestId }, headers);
}

/** Turns what a plugin passes to `respond` into bytes and a content type. */
function bodyAnswer(status: number, body: string | Buffer | object | undefined, headers: OutgoingHttpHeaders = {}): Answer {
  if (body === undefined || body === null) return { status, headers: { ...headers, 'content-length': 0 }, body: Buffer.alloc(0) };
  if (Buffer.isBuffer(body) || typeof body === 'string') {
    const bytes = Buffer.isBuffer(body) ? body : Buffer.from(body);
    const type = hasHeader(headers, 'content-type') ? {} : { 'content-type': 'text/plain; charset=utf-8' };
    return { status, headers: { ...type, ...headers, 'content-length': bytes.length }, body: bytes };
  }
  const typed = hasHeader(headers, 'content-type') ? headers : { ...headers, 'content-type': 'application/json; charset=utf-8' };
  const bytes = Buffer.from(JSON.stringify(body));
  return { status, headers: { ...typed, 'content-length': bytes.length }, body: bytes };
}

function hasHeader(headers: OutgoingHttpHeaders, name: string): boolean {
  return Object.keys(headers).some((k) => k.toLowerCase() === name);
}

/** Kong's messages for the proxy's own failures. */
export const MESSAGES = {
  noRoute: 'no Route matched with those values',
  badPath: 'Bad request: the request path is not a valid origin-form path',
  badHost: 'Bad Request: invalid Host header',
  repeatedHost: 'Bad Request: more than one Host header',
  hostNotAuthority: 'Bad Request: the Host header names another authority than :authority',
  noService: 'no Service found with those values',
  badGateway: 'An invalid response was received from the upstream server',
  timeout: 'The upstream server is timing out',
  dnsFailure: 'name resolution failed',
  /** An upstream with no healthy target (kong/runloop/balancer/init.lua). */
  noPeer: 'failure to get a peer from the ring-balancer',
  useHttps: 'Please use HTTPS protocol',
  useHttp2: 'Please use HTTP2 protocol',
  nonGrpc: 'Non-gRPC request matched gRPC route',
  grpcsOnly: 'gRPC request matched gRPCs route',
  badWebSocket: 'Invalid WebSocket handshake: this route accepts only WebSocket upgrades',
  bodyTooLarge: 'Request size limit exceeded',
  unexpected: 'An unexpected error occurred',
  methodNotAllowed: 'Method not allowed',
} as const;

/** How an upstream exchange failed; decides the status and whether a retry is possible. */
export type FailureKind = 'connect' | 'timeout' | 'dns' | 'reset';

const DNS_ERROR_CODES = new Set(['ENOTFOUND', 'EAI_AGAIN', 'EAI_FAIL', 'EAI_NONAME']);
const CONNECT_ERROR_CODES = new Set(['ECONNREFUSED', 'EHOSTUNREACH', 'ENETUNREACH']);

export function failureKind(err: NodeJS.ErrnoException, timedOut: boolean): FailureKind {
  if (timedOut) return 'timeout';
  if (err.code && DNS_ERROR_CODES.has(err.code)) return 'dns';
  if (err.code && CONNECT_ERROR_CODES.has(err.code)) return 'connect';
  return 'reset';
}

/** Kong's answers: 503 for DNS, 504 for timeouts, 502 otherwise. */
export const FAILURE_ANSWERS: Record<FailureKind, [number, string]> = {
  connect: [502, MESSAGES.badGateway],
  reset: [502, MESSAGES.badGateway],
  timeout: [504, MESSAGES.timeout],
  dns: [503, MESSAGES.dnsFailure],
};

/** The answer for an upstream connection error. */
export function upstreamFailureAnswer(err: NodeJS.ErrnoException, timedOut: boolean): [number, string] {
  return FAILURE_ANSWERS[failureKind(err, timedOut)];
}
