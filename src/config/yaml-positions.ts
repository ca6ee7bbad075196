/**
 * Where a problem of gateway.yaml stands: the line and column of the node a validation issue's path
 * leads to, or the path of the entry that holds a YAML syntax error. Validation works on plain values,
 * so positions are looked up afterwards in the parsed document, which keeps them.
 */
import { isMap, isScalar, isSeq, type Document, type LineCounter, type Scalar, type YAMLError } from 'yaml';
import { formatPath, isAboutKey, type Issue, type Path } from './schema.ts';

/** A place in the file, and the path to it as a message shows it (`routes[0].paths[1]`). */
export interface Position {
  line: number;
  col: number;
  path: string;
}

/** Where a validation issue points: the value at its path, or the key itself for an unknown field. */
export function issuePosition(issue: Issue, doc: Document, lines: LineCounter): Position {
  const { line, col } = lines.linePos(locate(doc, issue.path, isAboutKey(issue)));
  return { line, col, path: formatPath(issue.path) };
}

/** A YAML syntax error as the operator reads it: where the mistake is, and what to do. */
export interface YamlSyntaxError {
  at: Position;
  message: string;
}

/**
 * The document's syntax errors, each once. The yaml library reports some mistakes twice at one offset:
 * a key indented one space too far makes "nested mappings are not allowed in compact mappings" and
 * "implicit keys need to be on a single line" at the value of the line above, as that value swallowed
 * the key; the mistake is on the key's line, and the second error says it.
 */
export function syntaxErrors(doc: Document, lines: LineCounter, text: string): YamlSyntaxError[] {
  const byOffset = new Map<number, YAMLError>();
  for (const error of doc.errors) {
    if (!byOffset.has(error.pos[0]) || error.code === 'MULTILINE_IMPLICIT_KEY') byOffset.set(error.pos[0], error);
  }
  return [...byOffset.values()].map((error) => {
    if (error.code === 'MULTILINE_IMPLICIT_KEY') return keySpanningLines(error, doc, lines, text);
    return { at: positionOf(error.pos[0], doc, lines), message: `YAML: ${error.message.split('\n')[0]}` };
  });
}

/** A key read as the continuation of the value above it (`pos[1]` is its colon): the key's line is the mistake. */
function keySpanningLines(error: YAMLError, doc: Document, lines: LineCounter, text: string): YamlSyntaxError {
  const colon = lines.linePos(error.pos[1]);
  const lineStart = lines.lineStarts[colon.line - 1];
  const key = text.slice(lineStart, error.pos[1]).trim();
  const keyOffset = lineStart + text.slice(lineStart).search(/\S/);
  const continued = lines.linePos(error.pos[0]).line;
  return {
    at: positionOf(keyOffset, doc, lines),
    message: `YAML: '${key}:' is indented as if it continued the value of line ${continued} (a key cannot span lines): check its indentation`,
  };
}

/** The line and column of `offset`, with the path of the entry holding it. */
function positionOf(offset: number, doc: Document, lines: LineCounter): Position {
  const { line, col } = lines.linePos(offset);
  return { line, col, path: formatPath(pathAt(doc, offset, lines)) };
}

/** The offset of the deepest node on `path`: the key itself for an unknown field. */
function locate(doc: Document, path: Path, pointAtKey: boolean): number {
  let node: unknown = doc.contents;
  let offset = (node as { range?: number[] })?.range?.[0] ?? 0;
  for (let i = 0; i < path.length; i++) {
    const seg = path[i];
    if (isMap(node)) {
      const pair = node.items.find((p) => (isScalar(p.key) ? p.key.value : p.key) === seg);
      if (!pair) break;
      const keyOffset = (pair.key as { range?: number[] })?.range?.[0] ?? offset;
      const last = i === path.length - 1;
      node = pair.value;
      offset = last && pointAtKey ? keyOffset : ((node as { range?: number[] })?.range?.[0] ?? keyOffset);
    } else if (isSeq(node) && typeof seg === 'number' && node.items[seg] !== undefined) {
      node = node.items[seg];
      offset = (node as { range?: number[] })?.range?.[0] ?? offset;
    } else break;
  }
  return offset;
}

/**
 * The path of the deepest map entry or sequence item whose source holds `offset` (a YAML error's
 * position). A key spanning lines is the error's own making (a value that swallowed the next key): the
 * path ends before it rather than show it.
 */
function pathAt(doc: Document, offset: number, lines: LineCounter): Path {
  const path: Path = [];
  const holds = (node: unknown) => {
    const range = (node as { range?: number[] } | null)?.range;
    return range !== undefined && range[0] <= offset && offset < range[2];
  };
  let node: unknown = doc.contents;
  for (;;) {
    if (isMap(node)) {
      // A duplicate key is reported at the key: the entry whose key or value holds the offset.
      const pair = node.items.find((p) => holds(p.key) || holds(p.value));
      if (!pair || !isOneLineScalar(pair.key, lines)) break;
      path.push(String(pair.key.value));
      node = holds(pair.key) ? undefined : pair.value;
    } else if (isSeq(node)) {
      const index = node.items.findIndex(holds);
      if (index === -1) break;
      path.push(index);
      node = node.items[index];
    } else break;
  }
  return path;
}

function isOneLineScalar(node: unknown, lines: LineCounter): node is Scalar {
  if (!isScalar(node) || node.range === undefined || node.range === null) return false;
  return lines.linePos(node.range[0]).line === lines.linePos(node.range[1]).line;
}
