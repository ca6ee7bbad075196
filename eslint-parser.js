// typescript-eslint's parser, with every import and re-export read as a value one. import-x/no-cycle skips
// type-only imports, but a cycle of types ties modules together as much as one of values (neither side can
// be read, moved or tested alone), so here those count too.
import { parseForESLint as parseTypeScript } from '@typescript-eslint/parser';

const MODULE_LINKS = new Set(['ImportDeclaration', 'ExportNamedDeclaration', 'ExportAllDeclaration']);

export function parseForESLint(code, options) {
  const parsed = parseTypeScript(code, options);
  for (const node of parsed.ast.body) {
    if (!MODULE_LINKS.has(node.type)) continue;
    if (node.importKind) node.importKind = 'value';
    if (node.exportKind) node.exportKind = 'value';
    for (const specifier of node.specifiers ?? []) {
      if (specifier.importKind) specifier.importKind = 'value';
      if (specifier.exportKind) specifier.exportKind = 'value';
    }
  }
  return parsed;
}
