/**
 * Usage subjects as records of their own (OpenMeter's v1 subjects): a display name and metadata for a
 * subject key that events carry and customers claim as usage subjects. A record adds a description of
 * the subject and changes nothing of what it is billed for: usage is attributed by the customers'
 * `usage_attribution`, never by these records. Keyed by the subject key, so an upsert of the same key
 * from two processes leaves one record.
 */
import { ulid } from '../../shared/ids.ts';
import { formatInstant } from '../shared/calendar.ts';
import { invalid, notFound } from '../shared/errors.ts';
import { isObject, join, sealed, text, type Problems } from '../shared/fields.ts';
import { keys, PREFIXES, type BillingStore } from '../shared/store.ts';

export interface SubjectRecord {
  id: string;
  key: string;
  display_name: string | null;
  metadata: Record<string, unknown> | null;
  created_at: string;
  updated_at: string;
}

export type SubjectDefinition = Pick<SubjectRecord, 'key' | 'display_name' | 'metadata'>;

const MAX_SUBJECTS_PER_UPSERT = 100;
/** Metadata is the client's: kept as given, within a bound on its size. */
const MAX_METADATA_BYTES = 16 * 1024;

/** Every problem of an upsert's list of subjects; the definitions when there is none. */
export function validateSubjects(body: unknown): { definitions?: SubjectDefinition[]; problems: Problems } {
  if (!Array.isArray(body) || body.length < 1 || body.length > MAX_SUBJECTS_PER_UPSERT) {
    return { problems: [invalid('', `request body must be an array of 1 to ${MAX_SUBJECTS_PER_UPSERT} subjects`, 'type')] };
  }
  const out: Problems = [];
  const definitions = body.map((item, i) => {
    const at = join('', i);
    if (!isObject(item)) return void out.push(invalid(at, 'must be an object', 'type'));
    sealed(item, ['key', 'display_name', 'metadata'], at, out);
    const key = text(item, 'key', at, { required: true, min: 1, max: 256 }, out);
    const displayName = text(item, 'display_name', at, { max: 256 }, out) ?? null;
    const metadata = item.metadata ?? null;
    if (metadata !== null && !isObject(metadata)) out.push(invalid(join(at, 'metadata'), 'must be an object', 'type'));
    else if (metadata !== null && JSON.stringify(metadata).length > MAX_METADATA_BYTES) out.push(invalid(join(at, 'metadata'), `must be at most ${MAX_METADATA_BYTES} bytes of JSON`, 'max_length'));
    return key === undefined ? undefined : { key, display_name: displayName, metadata: metadata as SubjectRecord['metadata'] };
  });
  if (out.length > 0) return { problems: out };
  return { definitions: definitions as SubjectDefinition[], problems: out };
}

export class SubjectService {
  constructor(private readonly db: BillingStore) {}

  find(key: string): Promise<SubjectRecord | undefined> {
    return this.db.get<SubjectRecord>(keys.subjectRecord(key));
  }

  list(): Promise<SubjectRecord[]> {
    return this.db.list<SubjectRecord>(PREFIXES.subjectRecords);
  }

  /** Creates the subjects not recorded yet, replaces the display name and metadata of the others (one commit). */
  upsert(definitions: SubjectDefinition[]): Promise<SubjectRecord[]> {
    return this.db.transact(async (tx) => {
      const now = formatInstant(Date.now());
      const records: SubjectRecord[] = [];
      for (const def of definitions) {
        const current = await tx.get<SubjectRecord>(keys.subjectRecord(def.key));
        const record = { id: current?.id ?? ulid(), ...def, created_at: current?.created_at ?? now, updated_at: now };
        tx.put(keys.subjectRecord(def.key), record);
        records.push(record);
      }
      return records;
    }, 'subject');
  }

  delete(key: string): Promise<void> {
    return this.db.transact(async (tx) => {
      if (!(await tx.get(keys.subjectRecord(key)))) throw notFound('subject', key);
      tx.del(keys.subjectRecord(key));
    }, 'subject');
  }
}
