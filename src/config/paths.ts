/** Path checks with Kong's messages, shared by service paths (here) and route paths (the router's checks). */
/** Kong's characters for a service path: unreserved, sub-delims, `:`, `@`, `/` and `%`. */
const PATH_CHARACTERS = /^[A-Za-z0-9\-._~!$&'()*+,;=:@/%]*$/;
const BAD_ESCAPE = /%(?![0-9A-Fa-f]{2})/;

/** `%` only as the start of a well-formed `%XX` escape. */
export function checkEscapes(path: string): string | undefined {
  const badEscape = BAD_ESCAPE.exec(path);
  return badEscape ? `invalid url-encoded value: '${path.slice(badEscape.index, badEscape.index + 3)}'` : undefined;
}

/** Kong's `path` typedef check (service paths): RFC 3986 characters, then well-formed `%XX` escapes. */
export function checkPathCharacters(path: string): string | undefined {
  if (!PATH_CHARACTERS.test(path)) return `invalid path: '${path}' (characters outside of the reserved list of RFC 3986 found)`;
  return checkEscapes(path);
}
