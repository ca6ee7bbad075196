/**
 * Consumers: those declared in gateway.yaml (read-only) and those created through the admin API, which
 * persist in the store, survive restarts and reloads, and stay right across processes and nodes (see
 * EntityDirectory). Deleting one deletes its credentials of every type.
 */
import { consumerSchema, isUuid } from './config/entities.ts';
import type { Consumer } from './config/types.ts';
import type { Logger } from './log.ts';
import type { ConsumerDirectory, EntityDefinition } from './pdk/types.ts';
import type { Store } from './store/store.ts';
import { EntityDirectory } from './toolkit/entity-directory.ts';

/** Kong's consumers: by id or username in admin URLs; username and custom_id unique. */
export const consumerEntity: EntityDefinition = {
  name: 'consumers',
  schema: consumerSchema,
  endpointKey: 'username',
  unique: ['custom_id'],
  admin: { name: 'consumers' },
  keyPrefix: 'consumers/',
};

/**
 * A consumer named by a client or an operator, by id or username: a UUID-shaped reference is looked up
 * as an id only, anything else as a username only. One lookup for both would let a consumer whose
 * username is another's id stand in for it.
 */
export function consumerByReference(directory: ConsumerDirectory, reference: string): Consumer | undefined {
  return isUuid(reference) ? directory.byId(reference) : directory.byUsername(reference);
}

export class Consumers extends EntityDirectory<Consumer & { id: string }> implements ConsumerDirectory {
  constructor(store: Store, log?: Logger) {
    super(store, consumerEntity, { log });
  }

  byUsername(username: string): Consumer | undefined {
    return this.find('username', username);
  }
}
