/**
 * Kong's request-transformer templates, without running code: `$(...)` holds a reference to a request
 * value (`headers.name`, `headers['Name']`, `query_params.name`, `uri_captures.name`, `uri_captures[1]`,
 * `shared.name`) or a quoted string, several joined by `or` (the first that is set wins, as Lua's `or`).
 * Kong evaluates any Lua expression there; anything beyond references is refused when the file loads.
 */

/** What templates read: the client's request as it arrived (Kong's template environment). */
export interface TemplateSources {
  header(name: string): string | string[] | undefined;
  query(name: string): string | string[] | undefined;
  uriCapture(name: string): string | undefined;
  shared(name: string): unknown;
}

type Source = 'headers' | 'query_params' | 'uri_captures' | 'shared';
type Term = { literal: string } | { source: Source; key: string };
/** A template: text pieces, and between them expressions (alternatives joined by `or`). */
type Piece = string | Term[];

/** A template this plugin cannot render without running code (refused when the file loads). */
export class TemplateError extends Error {
  override readonly name = 'TemplateError';
  readonly code = 'REQUEST_TRANSFORMER_ERR_TEMPLATE';
}

const SOURCES = new Set<string>(['headers', 'query_params', 'uri_captures', 'shared']);
const TOKEN = /\s*(?:(or)\b|([A-Za-z_][A-Za-z0-9_]*)|('(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*")|(\[)|(\])|(\.)|(\d+))/y;

export class Template {
  private constructor(private readonly pieces: Piece[]) {}

  /** Parses `text`; throws TemplateError naming what is not supported. */
  static parse(text: string): Template {
    const pieces: Piece[] = [];
    let at = 0;
    for (;;) {
      const start = text.indexOf('$(', at);
      if (start === -1) break;
      if (start > at) pieces.push(text.slice(at, start));
      const end = closingParen(text, start + 2);
      pieces.push(parseExpression(text.slice(start + 2, end)));
      at = end + 1;
    }
    if (at < text.length) pieces.push(text.slice(at));
    return new Template(pieces);
  }

  /** True when the template reads nothing (a plain value). */
  get isPlain(): boolean {
    return this.pieces.every((p) => typeof p === 'string');
  }

  render(sources: TemplateSources): string {
    let out = '';
    for (const piece of this.pieces) out += typeof piece === 'string' ? piece : (evaluate(piece, sources) ?? '');
    return out;
  }
}

/** The `)` closing the expression opened at `from`, skipping quoted strings and nested brackets. */
function closingParen(text: string, from: number): number {
  let depth = 0;
  for (let i = from; i < text.length; i++) {
    const c = text[i];
    if (c === "'" || c === '"') {
      const close = text.indexOf(c, i + 1);
      if (close === -1) break;
      i = close;
    } else if (c === '(') depth++;
    else if (c === ')') {
      if (depth === 0) return i;
      depth--;
    }
  }
  throw new TemplateError("unclosed '$('");
}

function parseExpression(source: string): Term[] {
  const tokens = tokenize(source);
  const terms: Term[] = [];
  let i = 0;
  const expectTerm = () => {
    const t = tokens[i++];
    if (t?.kind === 'string') return terms.push({ literal: t.value });
    if (t?.kind !== 'name' || !SOURCES.has(t.value)) throw unsupported(source);
    const next = tokens[i++];
    if (next?.kind === 'dot' && tokens[i]?.kind === 'name') return terms.push({ source: t.value as Source, key: tokens[i++].value });
    if (next?.kind === 'open' && (tokens[i]?.kind === 'string' || tokens[i]?.kind === 'number') && tokens[i + 1]?.kind === 'close') {
      const key = tokens[i].value;
      i += 2;
      return terms.push({ source: t.value as Source, key });
    }
    throw unsupported(source);
  };
  expectTerm();
  while (i < tokens.length) {
    if (tokens[i++].kind !== 'or') throw unsupported(source);
    expectTerm();
  }
  return terms;
}

interface Token {
  kind: 'or' | 'name' | 'string' | 'open' | 'close' | 'dot' | 'number';
  value: string;
}

function tokenize(source: string): Token[] {
  const tokens: Token[] = [];
  TOKEN.lastIndex = 0;
  while (TOKEN.lastIndex < source.length) {
    if (/^\s*$/.test(source.slice(TOKEN.lastIndex))) break;
    const m = TOKEN.exec(source);
    if (!m) throw unsupported(source);
    if (m[1]) tokens.push({ kind: 'or', value: 'or' });
    else if (m[2]) tokens.push({ kind: 'name', value: m[2] });
    else if (m[3]) tokens.push({ kind: 'string', value: m[3].slice(1, -1).replace(/\\(.)/g, '$1') });
    else if (m[4]) tokens.push({ kind: 'open', value: '[' });
    else if (m[5]) tokens.push({ kind: 'close', value: ']' });
    else if (m[6]) tokens.push({ kind: 'dot', value: '.' });
    else tokens.push({ kind: 'number', value: m[7] });
  }
  return tokens;
}

function unsupported(source: string): TemplateError {
  return new TemplateError(
    `in $(${source}), only references such as headers.name, headers['Name'], query_params.name, uri_captures.name, uri_captures[1] and shared.name, or quoted strings, joined by 'or', are supported (no code is run)`,
  );
}

/** The first alternative that is set; a repeated header or parameter reads as its values joined by ", ". */
function evaluate(terms: Term[], sources: TemplateSources): string | undefined {
  for (const term of terms) {
    if ('literal' in term) return term.literal;
    const value = lookup(term, sources);
    if (value === undefined || value === null) continue;
    return Array.isArray(value) ? value.join(', ') : String(value);
  }
  return undefined;
}

function lookup(term: { source: Source; key: string }, sources: TemplateSources): unknown {
  switch (term.source) {
    case 'headers':
      return sources.header(term.key);
    case 'query_params':
      return sources.query(term.key);
    case 'uri_captures':
      return sources.uriCapture(term.key);
    case 'shared':
      return sources.shared(term.key);
  }
}
