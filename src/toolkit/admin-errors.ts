/**
 * The admin API's errors, made here only, in Kong's shapes (kong/db/errors.lua and the status table of
 * kong/api/endpoints.lua): each class carries Kong's numeric `code` and `name`, and its body is what Kong
 * answers, `{code, name, message, fields?}`. Plugins and the core throw them; the admin router answers.
 */
import { HttpError } from '../pipeline/http-error.ts';
import type { Issue } from '../config/schema.ts';

export abstract class AdminError extends HttpError {
  abstract override readonly code: number;
  abstract override readonly name: string;

  /** What Kong puts in `fields` (per-field messages, or the conflicting values). */
  protected fields(): Record<string, unknown> | undefined {
    return undefined;
  }

  override body(): object {
    const fields = this.fields();
    return { code: this.code, name: this.name, message: this.message, ...(fields ? { fields } : {}) };
  }
}

/** Kong's `schema_violation`: `fields` mirrors the input (arrays per element, `@entity` for record checks). */
export class SchemaViolationError extends AdminError {
  readonly code = 2;
  readonly name = 'schema violation';

  constructor(readonly issues: Issue[]) {
    super(400, schemaViolationMessage(issues));
  }

  protected override fields(): Record<string, unknown> {
    const fields: Record<string, any> = {};
    for (const { path, message } of this.issues) {
      const [field, index] = path;
      if (field === undefined) (fields['@entity'] ??= []).push(message);
      else if (typeof index === 'number') {
        const list: (string | null)[] = (fields[field] ??= []);
        while (list.length < index) list.push(null);
        list[index] = message;
      } else fields[field] = message;
    }
    return fields;
  }
}

function schemaViolationMessage(issues: Issue[]): string {
  const parts = issues.map(({ path, message }) => `${path.length ? path.filter((p) => typeof p === 'string').join('.') : '@entity'}: ${message}`);
  return issues.length === 1 ? `schema violation (${parts[0]})` : `${issues.length} schema violations (${parts.join('; ')})`;
}

/** Kong's `primary_key_violation`: an entity with this id exists already. */
export class PrimaryKeyViolationError extends AdminError {
  readonly code = 3;
  readonly name = 'primary key violation';

  constructor(readonly id: string) {
    super(400, `primary key violation on key '{id="${id}"}'`);
  }

  protected override fields(): Record<string, unknown> {
    return { id: this.id };
  }
}

/** Kong's `foreign_key_violation_invalid_reference`: the referenced entity does not exist. */
export class ForeignKeyViolationError extends AdminError {
  readonly code = 4;
  readonly name = 'foreign key violation';

  constructor(
    readonly field: string,
    readonly entity: string,
    readonly reference: string,
  ) {
    super(400, `the foreign key '{id="${reference}"}' does not reference an existing '${entity}' entity.`);
  }

  protected override fields(): Record<string, unknown> {
    return { [this.field]: { id: this.reference } };
  }
}

/** Kong's `unique_violation` (409): `values` are the conflicting fields as the client gave them. */
export class UniqueViolationError extends AdminError {
  readonly code = 5;
  readonly name = 'unique constraint violation';

  constructor(readonly values: Record<string, unknown>) {
    super(409, `UNIQUE violation detected on '${luaLiteral(values)}'`);
  }

  protected override fields(): Record<string, unknown> {
    return this.values;
  }
}

/** A value as Kong's messages print it (a Lua table literal): `{consumer=null,name="x",service={id="..."}}`. */
function luaLiteral(value: unknown): string {
  if (value === null || value === undefined) return 'null';
  if (typeof value !== 'object' || Array.isArray(value)) return JSON.stringify(value);
  const pairs = Object.entries(value).map(([key, inner]) => `${key}=${luaLiteral(inner)}`);
  return `{${pairs.join(',')}}`;
}

/** Kong's `foreign_key_violation_restricted`: the entity cannot go while others reference it. */
export class ReferencedEntityError extends AdminError {
  readonly code = 4;
  readonly name = 'foreign key violation';

  constructor(
    readonly parent: string,
    readonly child: string,
  ) {
    super(400, `an existing '${child}' entity references this '${parent}' entity`);
  }

  protected override fields(): Record<string, unknown> {
    return { '@referenced_by': this.child };
  }
}

/** An entity that is not there: Kong's endpoints answer `{"message": "Not found"}`. */
export class NotFoundError extends AdminError {
  readonly code = 6;
  readonly name = 'not found';

  constructor() {
    super(404, 'Not found');
  }

  override body(): object {
    return { message: this.message };
  }
}

/** Kong's `invalid_offset`: an offset the listing never handed out. */
export class InvalidOffsetError extends AdminError {
  readonly code = 7;
  readonly name = 'invalid offset';

  constructor(offset: string, reason: string) {
    super(400, `'${offset}' is not a valid offset: ${reason}`);
  }
}

/**
 * Kong's `database_error` code, for a write that kept meeting another process's change of the same
 * entity (each attempt starts again from the stored version): the client may simply try again.
 */
export class ConcurrentChangeError extends AdminError {
  readonly code = 8;
  readonly name = 'database error';

  constructor(readonly id: string) {
    super(409, `the entity '${id}' was changed by another request meanwhile: try again`);
  }
}

/** Kong's `invalid_size`: `size` is not a number, or not an integer within the page limits. */
export class InvalidSizeError extends AdminError {
  readonly code = 9;
  readonly name = 'invalid size';

  constructor(message: string) {
    super(400, message);
  }
}

/**
 * Kong's `invalid_options`: a listing option it cannot use (e.g. `tags`); the per-option reasons go in
 * `options`, not `fields`, as kong/db/errors.lua puts them.
 */
export class InvalidOptionsError extends AdminError {
  readonly code = 11;
  readonly name = 'invalid options';

  constructor(readonly options: Record<string, string>) {
    const reasons = Object.entries(options).map(([option, reason]) => `${option}: ${reason}`);
    super(400, reasons.length === 1 ? `invalid option (${reasons[0]})` : `${reasons.length} option violations (${reasons.join('; ')})`);
  }

  override body(): object {
    return { ...super.body(), options: this.options };
  }
}

/** Kong's `operation_unsupported` (405), e.g. a write to an entity that gateway.yaml declares. */
export class OperationUnsupportedError extends AdminError {
  readonly code = 12;
  readonly name = 'operation unsupported';

  constructor(message: string) {
    super(405, message);
  }
}

/** The verbs Kong's DB-less errors use for each write. */
const OPERATIONS = { POST: 'create', PUT: 'create or update', PATCH: 'update', DELETE: 'remove' } as const;
export type WriteMethod = keyof typeof OPERATIONS;

/** Kong's DB-less answer to a write of core entities only gateway.yaml declares. */
export function entityWriteUnsupported(entity: string, method: WriteMethod): OperationUnsupportedError {
  return new OperationUnsupportedError(`cannot ${OPERATIONS[method]} '${entity}' entities when not using a database`);
}

/** A write to one entity declared in gateway.yaml, which only the file changes. */
export function declaredEntityReadOnly(entity: string, method: WriteMethod): OperationUnsupportedError {
  return new OperationUnsupportedError(`cannot ${OPERATIONS[method]} this '${entity}' entity: it is declared in gateway.yaml (edit the file and reload)`);
}
