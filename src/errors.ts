/**
 * The core's errors that are not HTTP answers, made here only (as undici's lib/core/errors.js and
 * fastify's lib/errors.js): each class has a stable `name` and a `TOLLGATE_ERR_*` code, which the log
 * lines that report it carry (pino writes an error's own fields, `code` among them) and the CLI turns
 * into an exit code. The errors that end a request with a status are HttpErrors, made beside the
 * answer they stand for: src/pipeline/http-error.ts (the base), src/pipeline/upstream-edits.ts (a header
 * value no request can carry), src/toolkit/limits.ts (refused work), src/toolkit/admin-errors.ts (the
 * admin API's, with Kong's numeric codes); the store keeps its own catalogue, src/store/errors.ts.
 * docs/errors.md lists every code, what it means and what to do.
 */
import type { Path } from './config/schema.ts';
import type { FailureKind } from './proxy/respond.ts';

/** The root of this catalogue: a stable `name` and `code`, whatever the message says. */
export abstract class TollgateError extends Error {
  abstract override readonly name: string;
  abstract readonly code: string;
}

/**
 * The base of one entry of the catalogue, its `name` and `code` fixed (fastify's createError): an entry
 * is `class FooError extends entry('FooError', 'TOLLGATE_ERR_FOO') {}`, with fields of its own if any.
 */
function entry(name: string, code: string) {
  return class extends TollgateError {
    override readonly name: string = name;
    readonly code: string = code;
  };
}

/** One problem of a configuration file, and where it is (`file:line:col: path: message`). */
export class ConfigError extends entry('ConfigError', 'TOLLGATE_ERR_CONFIG_INVALID') {
  constructor(
    readonly file: string,
    readonly line: number,
    readonly col: number,
    readonly path: string,
    message: string,
  ) {
    super(message);
  }
  override toString(): string {
    return `${this.file}:${this.line}:${this.col}: ${this.path || '(root)'}: ${this.message}`;
  }
}

/**
 * What a plugin's `prepare` throws for a config it cannot turn into what its hooks need: the file is
 * refused as a `checkConfig` issue refuses it, a ConfigError at `path` (relative to the instance's `config`).
 */
export class ConfigCompileError extends entry('ConfigCompileError', 'TOLLGATE_ERR_CONFIG_COMPILE') {
  constructor(
    readonly path: Path,
    message: string,
  ) {
    super(message);
  }
}

/** A configuration file the gateway was given at start or reload has these problems. */
export class ConfigLoadError extends entry('ConfigLoadError', 'TOLLGATE_ERR_CONFIG') {
  constructor(readonly errors: ConfigError[]) {
    super(errors.map(String).join('\n'));
  }
}

/** A start-up failure with a message meant for the operator (taken port, unreadable data dir). */
export class StartupError extends entry('StartupError', 'TOLLGATE_ERR_STARTUP') {}

/**
 * A worker of a node of several processes was given a file that needs one process (worker_processes
 * left at its default, with a plugin that keeps state in one process): it keeps its configuration.
 */
export class OneProcessConfigError extends StartupError {
  override readonly name = 'OneProcessConfigError';
  override readonly code = 'TOLLGATE_ERR_ONE_PROCESS_CONFIG';
  constructor(reason: string) {
    super(`${reason}; this node runs several: restart it to apply this file`);
  }
}

/** Bad usage: an unknown command or option, a missing value. Exit code 2. */
export class UsageError extends entry('UsageError', 'TOLLGATE_ERR_USAGE') {
  constructor(
    message: string,
    /** The command whose help tells the right usage, when known. */
    readonly command?: string,
  ) {
    super(message);
  }
}

/** Something the operator of `tollgate stop|reload|status` must hear, said in one line, ending the command with exit 1. */
export class ControlError extends entry('ControlError', 'TOLLGATE_ERR_CONTROL') {}

/**
 * Where an upstream exchange failed: `connect` (refused, DNS, connect timeout: nothing was sent), `early`
 * (the connection broke before any response byte: a keep-alive socket the upstream had just closed), or
 * `exchange` (anything later, or a timeout).
 */
export type FailureStage = 'connect' | 'early' | 'exchange';

/** The upstream could not be reached or failed mid-exchange, after `tries` tries (502, 503 or 504). */
export class UpstreamFailure extends entry('UpstreamFailure', 'TOLLGATE_ERR_UPSTREAM') {
  constructor(
    readonly kind: FailureKind,
    message: string,
    readonly tries: number,
    readonly stage: FailureStage = 'exchange',
    /** `cause`: what the HTTP client or the socket reported (its code goes into the log line). */
    options?: ErrorOptions,
  ) {
    super(message, options);
  }
}

/**
 * The upstream took longer than the service's connect, write or read timeout (the message says which):
 * the gateway gave up on it (504). Its own code, not the HTTP client's, so that it is never taken for
 * a timeout the client library reported.
 */
export class UpstreamTimeoutError extends entry('UpstreamTimeoutError', 'TOLLGATE_ERR_UPSTREAM_TIMEOUT') {}

/**
 * The HTTP client refused to send the request (an invalid header, path or method): a defect of the
 * request the gateway built, never the upstream's failure. Nothing was sent; nothing is retried.
 */
export class UnsendableRequestError extends entry('UnsendableRequestError', 'TOLLGATE_ERR_UNSENDABLE_REQUEST') {}

/** The upstream's certificate chain is longer than the service's tls_verify_depth allows: the connection is refused. */
export class ChainTooLongError extends entry('ChainTooLongError', 'TOLLGATE_ERR_UPSTREAM_CHAIN_TOO_LONG') {}

/** A plugin set an upstream header that is not a header name, or one the gateway sets itself (the plugin's 500). */
export class ForbiddenUpstreamHeaderError extends entry('ForbiddenUpstreamHeaderError', 'TOLLGATE_ERR_FORBIDDEN_UPSTREAM_HEADER') {}

/** A pattern the regex engine cannot run, with where in the pattern (0-based) the construct starts. */
export class RegexRefusedError extends entry('RegexRefusedError', 'TOLLGATE_ERR_REGEX_REFUSED') {
  constructor(
    readonly reason: string,
    readonly position: number,
  ) {
    super(`${reason}, at position ${position}`);
  }
}

/**
 * JSON from outside nested deeper than `limit` (toolkit/json.ts). A SyntaxError, not a TollgateError,
 * so that every reader treats too deep JSON as it treats malformed JSON.
 */
export class JsonTooDeepError extends SyntaxError {
  override readonly name = 'JsonTooDeepError';
  readonly code = 'TOLLGATE_ERR_JSON_TOO_DEEP';

  constructor(readonly limit: number) {
    super(`JSON nested deeper than ${limit} levels`);
  }
}
