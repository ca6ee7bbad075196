/**
 * Where a problem of gateway.yaml stands: the line and column of the node a validation issue's path
 * leads to, or the path of the entry that holds a YAML syntax error. Validation works on plain values,
 * so positions are looked up afterwards in the parsed document, which keeps them.
 */
import { isMap, isScalar, isSeq, type Document, type LineCounter } from 'yaml';
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

/** Where a YAML syntax error at `offset` is, with the path of the entry holding it. */
export function syntaxErrorPosition(offset: number, doc: Document, lines: LineCounter): Position {
  const { line, col } = lines.linePos(offset);
  return { line, col, path: formatPath(pathAt(doc, offset)) };
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

/** The path of the deepest map entry or sequence item whose source holds `offset` (a YAML error's position). */
function pathAt(doc: Document, offset: number): Path {
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
      if (!pair) break;
      path.push(isScalar(pair.key) ? String(pair.key.value) : String(pair.key));
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
