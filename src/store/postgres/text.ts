/**
 * PostgreSQL text cannot hold U+0000, which store keys and values may contain: it is escaped with an
 * order-preserving code (U+0001 U+0001 for U+0000, U+0001 U+0002 for U+0001), so keys still sort as
 * their originals do.
 */
/** Escapes U+0000 (and U+0001, the escape character) keeping the order of keys. */
export function encodeText(text: string): string {
  if (text.indexOf('\u0000') === -1 && text.indexOf('\u0001') === -1) return text;
  return text.replace(/[\u0000\u0001]/g, (c) => (c === '\u0000' ? '\u0001\u0001' : '\u0001\u0002'));
}

export function decodeText(text: string): string {
  if (text.indexOf('\u0001') === -1) return text;
  return text.replace(/\u0001([\u0001\u0002])/g, (_, c) => (c === '\u0001' ? '\u0000' : '\u0001'));
}
