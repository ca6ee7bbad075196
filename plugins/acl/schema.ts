/**
 * Kong's acl (kong/plugins/acl/schema.lua and daos.lua): allow or deny lists of group names, and the
 * `acls` entity that puts a consumer in a group (one group name once per consumer).
 */
import { describedAs, headerValueProblem, type ConsumerChild, type EntityDefinition, type Infer, type Issue, type RecordSchema } from '../../src/pdk/index.ts';

const LISTS = "'config.allow', 'config.deny'";
const nonEmpty = (list: unknown) => Array.isArray(list) && list.length > 0;

/**
 * Kong's entity checks over `config.allow` and `config.deny`, in its order and with its messages
 * (kong/db/schema/init.lua): `only_one_of` fails unless exactly one list is non-empty, `at_least_one_of`
 * when neither is; a config with neither gets both messages, as on Kong (whose loader fills an absent
 * list with null, so both checks run).
 */
function exactlyOneList(config: Record<string, any>): Issue[] {
  const given = [config.allow, config.deny].filter(nonEmpty).length;
  const issues: Issue[] = [];
  if (given !== 1) issues.push({ path: [], message: `exactly one of these fields must be non-empty: ${LISTS}` });
  if (given === 0) issues.push({ path: [], message: `at least one of these fields must be non-empty: ${LISTS}` });
  return issues;
}

export const configSchema = {
  type: 'record',
  fields: {
    allow: { type: 'array', elements: { type: 'string' } },
    deny: { type: 'array', elements: { type: 'string' } },
    hide_groups_header: { type: 'boolean', required: true, default: false },
    always_use_authenticated_groups: { type: 'boolean', required: true, default: false },
  },
  entity_checks: [describedAs([{ only_one_of: ['allow', 'deny'] }, { at_least_one_of: ['allow', 'deny'] }], exactlyOneList)],
} as const satisfies RecordSchema;

export type AclConfig = Infer<typeof configSchema>;

const aclSchema = {
  type: 'record',
  fields: {
    // Sent upstream in X-Consumer-Groups: a name no header can carry would fail each request of its consumer.
    group: { type: 'string', required: true, len_min: 1, custom: headerValueProblem },
    tags: { type: 'set', elements: { type: 'string', len_min: 1 } },
  },
} as const satisfies RecordSchema;

export type Acl = ConsumerChild<Infer<typeof aclSchema>>;

export const aclEntity: EntityDefinition = {
  name: 'acls',
  schema: aclSchema,
  parent: { entity: 'consumers', field: 'consumer', required: true },
  // `/consumers/{c}/acls/{group}` names a consumer's group by its name (kong/plugins/acl/api.lua).
  uniqueInParent: 'group',
  admin: { name: 'acls' },
  keptByCore: true,
};
