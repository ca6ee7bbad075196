/**
 * What plugins put into the upstream request is checked where they put it, never discovered by the
 * HTTP client: a request the client refuses to send would otherwise read as the upstream's failure (its
 * target counted down, the request retried on the next one). A header value that cannot be sent comes
 * from the client's input (a template copied a query parameter or a header into it): 400. A header no
 * plugin may set is the plugin's own error (500); request-transformer refuses such names at load.
 */
import { ForbiddenUpstreamHeaderError } from '../errors.ts';
import { upstreamHeaderNameProblem } from '../proxy/headers.ts';
import { HttpError } from './http-error.ts';

/** What HTTP/1.1 and HTTP/2 clients send as it is: field content without controls but HTAB, one byte per character. */
const UNSENDABLE_CHARACTER = /[^\t\x20-\x7e\x80-\xff]/u;

/** A header value holds a character no header can carry (CR, LF, NUL, another control, or one above U+00FF). */
export class UnsendableHeaderValueError extends HttpError {
  override readonly name = 'UnsendableHeaderValueError';
  override readonly code = 'TOLLGATE_ERR_UNSENDABLE_HEADER_VALUE';

  constructor(header: string, character: string) {
    super(400, `Bad request: the upstream header '${header}' would hold ${codePoint(character)}; header values cannot carry control characters or characters above U+00FF`);
  }
}

/** Throws unless the upstream request can carry `value` as its header `name` (lowercase). */
export function checkUpstreamHeader(name: string, value: string | string[]): void {
  const problem = upstreamHeaderNameProblem(name) ?? (name === 'host' && Array.isArray(value) ? 'the upstream Host takes one value' : undefined);
  if (problem) throw new ForbiddenUpstreamHeaderError(problem);
  for (const one of Array.isArray(value) ? value : [value]) {
    const unsendable = UNSENDABLE_CHARACTER.exec(one);
    if (unsendable) throw new UnsendableHeaderValueError(name, unsendable[0]);
  }
}

function codePoint(character: string): string {
  return 'U+' + character.codePointAt(0)!.toString(16).toUpperCase().padStart(4, '0');
}
